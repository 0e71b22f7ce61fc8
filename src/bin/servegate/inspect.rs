//! `servegate inspect`: one response (or a serve log) parsed by the library (`servegate::inspect`) and
//! printed as JSON.

use std::path::PathBuf;

use servegate::error::exit;

/// `servegate inspect FILE`: exit 0 with the JSON printed (whatever its `ok`: inspect reports, it does not
/// judge), 2 a bad regex, 5 an unreadable file.
pub fn cmd_inspect(
    file: &std::path::Path,
    model: Option<String>,
    models: Option<PathBuf>,
    require: Option<String>,
    forbid: Option<String>,
) -> i32 {
    use servegate::inspect;
    let fail = |e: String| {
        errln!("error: {e}");
        exit::EVIDENCE_ERROR
    };
    if file.extension().is_some_and(|e| e == "log") {
        let re = |p: Option<String>, flag: &str| match p.map(|p| regex::Regex::new(&p)) {
            Some(Err(e)) => Err(format!("--{flag}: {e}")),
            Some(Ok(r)) => Ok(Some(r)),
            None => Ok(None),
        };
        let (require, forbid) = match (re(require, "require"), re(forbid, "forbid")) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => {
                errln!("error: {e}");
                return exit::USAGE;
            }
        };
        let bytes = match servegate::io::input::read_piped(
            file,
            servegate::io::input::MAX_EVIDENCE_BYTES,
        ) {
            Ok(b) => b,
            Err(e) => return fail(format!("{}: {e}", file.display())),
        };
        let out = inspect::inspect_log(
            &file.display().to_string(),
            &bytes,
            require.as_ref(),
            forbid.as_ref(),
        );
        outln!(
            "{}",
            servegate::text::json(&serde_json::to_string_pretty(&out).unwrap_or_default())
        );
        return exit::PASS;
    }
    let served_models = match &models {
        None => None,
        Some(p) => match servegate::io::input::read_piped(p, inspect::INSPECT_CAP_BYTES)
            .map_err(|e| e.to_string())
            .and_then(|b| inspect::served_models_of(&p.display().to_string(), &b))
        {
            Ok(ids) => Some(ids),
            Err(e) => return fail(format!("{}: {e}", p.display())),
        },
    };
    let identity = inspect::Identity {
        requested_model: model,
        served_models,
    };
    match inspect::inspect_file(file).map(|mut out| {
        inspect::apply_identity(&mut out.summary, &identity);
        out
    }) {
        Ok(out) => {
            outln!(
                "{}",
                servegate::text::json(&serde_json::to_string_pretty(&out).unwrap_or_default())
            );
            exit::PASS
        }
        Err(e) => {
            errln!("error: {e}");
            exit::EVIDENCE_ERROR
        }
    }
}
