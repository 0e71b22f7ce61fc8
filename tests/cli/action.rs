//! The composite GitHub Action (`action.yml` at the repository root, docs/ci.md "The servegate Action"): it
//! parses as a composite action; every `servegate ...` command its steps run exists in this binary with the
//! flags they pass (each subcommand's `--help`); and its gate step's script, run locally with bash as the
//! runner would run it (the inputs as its `env:`, `$GITHUB_OUTPUT` a file, servegate on PATH), writes the
//! reports and the exit code, which its last step exits with: 0 on a passing gate, 1 on a failing one.

use std::path::Path;
use std::process::Command;

use yaml_rust2::{Yaml, YamlLoader};

use crate::fixtures;

fn action() -> Yaml {
    let text = std::fs::read_to_string(fixtures::root().join("action.yml")).expect("action.yml");
    YamlLoader::load_from_str(&text)
        .expect("action.yml parses")
        .remove(0)
}

fn steps(a: &Yaml) -> &[Yaml] {
    a["runs"]["steps"].as_vec().expect("runs.steps")
}

/// The `run:` script of the step named `name`.
fn script<'a>(a: &'a Yaml, name: &str) -> &'a str {
    steps(a)
        .iter()
        .find(|s| s["name"].as_str() == Some(name))
        .and_then(|s| s["run"].as_str())
        .unwrap_or_else(|| panic!("no step {name:?} with a run script"))
}

/// Each `servegate ...` command of `script` (continuation lines joined): its words.
fn servegate_commands(script: &str) -> Vec<Vec<String>> {
    let joined = script.replace("\\\n", " ");
    joined
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("servegate "))
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect()
}

#[test]
fn the_action_is_composite_and_every_servegate_command_it_runs_exists() {
    let a = action();
    assert_eq!(a["runs"]["using"].as_str(), Some("composite"));
    for input in [
        "gates",
        "version",
        "runs-dir",
        "reports-dir",
        "args",
        "artifact-name",
    ] {
        assert!(!a["inputs"][input].is_badvalue(), "input {input}");
    }
    // The evidence is uploaded, whatever the gates said.
    let upload = steps(&a)
        .iter()
        .find(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("actions/upload-artifact@"))
        })
        .expect("an upload-artifact step");
    assert_eq!(upload["if"].as_str(), Some("${{ !cancelled() }}"));
    assert!(upload["with"]["path"]
        .as_str()
        .unwrap()
        .contains("${{ inputs.runs-dir }}"));
    // The last step exits with servegate's code.
    let last = steps(&a).last().unwrap();
    assert!(last["env"]["SG_CODE"]
        .as_str()
        .unwrap()
        .contains("steps.gates.outputs.exit-code"));
    let mut seen = Vec::new();
    for s in steps(&a) {
        let Some(run) = s["run"].as_str() else {
            continue;
        };
        assert_eq!(
            s["shell"].as_str(),
            Some("bash"),
            "a composite run step names its shell"
        );
        for cmd in servegate_commands(run) {
            let sub: Vec<&str> = cmd[1..]
                .iter()
                .map(String::as_str)
                .take_while(|w| !w.starts_with('-'))
                .take(1)
                .collect();
            let mut help = Command::new(fixtures::BIN);
            help.args(&sub).arg("--help");
            let out = help.output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "servegate {sub:?} --help: {text}");
            for flag in cmd.iter().filter(|w| w.starts_with("--")) {
                assert!(
                    text.contains(flag.as_str()),
                    "servegate {sub:?} has no {flag}: {text}"
                );
            }
            seen.push(cmd.join(" "));
        }
    }
    assert!(
        seen.iter().any(|c| c.starts_with("servegate run ")),
        "{seen:?}"
    );
    assert!(seen.iter().any(|c| c == "servegate --version"), "{seen:?}");
}

/// Runs the action's gate step and then its exit step on `gate`, as the runner would; returns the exit-code
/// output and the exit step's status.
fn run_steps(dir: &Path, gate: &str) -> (String, Option<i32>) {
    let a = action();
    let bin_dir = Path::new(fixtures::BIN).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = dir.join("github_output");
    std::fs::write(&output, "").unwrap();
    let mut cmd = Command::new("bash");
    fixtures::clean(&mut cmd);
    let st = cmd
        .arg("-c")
        .arg(script(&a, "run the gates"))
        .current_dir(dir)
        .env("PATH", &path)
        .env("SG_GATES", gate)
        .env("SG_RUNS", "target/servegate/runs")
        .env("SG_REPORTS", "target/servegate")
        .env("SG_ARGS", "")
        .env("GITHUB_OUTPUT", &output)
        .env("GITHUB_STEP_SUMMARY", dir.join("step_summary.md"))
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "the gate step itself never fails: {st:?}"
    );
    let outputs = std::fs::read_to_string(&output).unwrap();
    let code = outputs
        .lines()
        .find_map(|l| l.strip_prefix("exit-code="))
        .unwrap_or_else(|| panic!("{outputs}\n{}", String::from_utf8_lossy(&st.stdout)))
        .to_string();
    assert!(
        outputs.contains("junit=target/servegate/junit.xml"),
        "{outputs}"
    );
    for f in ["junit.xml", "results.json", "summary.md"] {
        assert!(dir.join("target/servegate").join(f).exists(), "{f}");
    }
    assert!(dir.join("target/servegate/runs").is_dir());
    let exit = Command::new("bash")
        .arg("-c")
        .arg(script(&a, "exit with servegate's code"))
        .env("SG_CODE", &code)
        .status()
        .unwrap();
    (code, exit.code())
}

#[test]
fn the_actions_steps_run_the_gates_and_exit_with_servegates_code() {
    let tmp = tempfile::tempdir().unwrap();
    let serve =
        fixtures::scripted_command(&fixtures::chat_script("Paris is the capital of France ."));
    let gate = |name: &str, answer: &str| {
        format!("[gate]\nname = \"{name}\"\n[serve]\ncommand = {serve}\n[request]\nmodel = \"fake-chat\"\nmax_tokens = 16\nprompts = [\"What is the capital of France?\"]\n[assert.content]\n[assert.known_answer]\nmatches = \"{answer}\"\n")
    };
    std::fs::create_dir(tmp.path().join("gates")).unwrap();
    std::fs::write(tmp.path().join("gates/good.toml"), gate("good", "Paris")).unwrap();
    let (code, exit) = run_steps(tmp.path(), "gates/*.toml");
    assert_eq!((code.as_str(), exit), ("0", Some(0)));
    assert!(std::fs::read_to_string(tmp.path().join("step_summary.md"))
        .unwrap()
        .contains("good"));
    std::fs::write(tmp.path().join("gates/bad.toml"), gate("bad", "Lyon")).unwrap();
    let (code, exit) = run_steps(tmp.path(), "gates/*.toml");
    assert_eq!((code.as_str(), exit), ("1", Some(1)));
    // No exit code (the gate step never ran): the last step fails, never passes.
    let a = action();
    let st = Command::new("bash")
        .arg("-c")
        .arg(script(&a, "exit with servegate's code"))
        .env("SG_CODE", "")
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(2));
}
