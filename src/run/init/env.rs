//! The environment a serve `servegate init` started ran with, as far as the written gate needs it: the
//! variables of init's own environment that steer an engine (model hubs offline or elsewhere, the device, the
//! threads), written under `[serve.env]` so the gate starts the serve the way init's run did on a machine
//! (CI) whose environment lacks them. A variable whose name says it holds a secret is named in a comment,
//! never written.

/// Name prefixes of the variables that steer the engines servegate profiles: Hugging Face's hub and
/// transformers (`HF_HUB_OFFLINE`, `HF_HOME`, `TRANSFORMERS_OFFLINE`), vLLM, SGLang, llama.cpp's server
/// (`LLAMA_ARG_*`) and ggml, Ollama, PyTorch, AMD's XRT and Ryzen AI (the NPU's runtime), Lemonade,
/// FastFlowLM.
pub(crate) const PREFIXES: &[&str] = &[
    "HF_",
    "HUGGINGFACE_",
    "TRANSFORMERS_",
    "VLLM_",
    "SGLANG_",
    "LLAMA_",
    "GGML_",
    "OLLAMA_",
    "TORCH_",
    "PYTORCH_",
    "XRT_",
    "XLNX_",
    "RYZEN_AI_",
    "LEMONADE_",
    "FLM_",
];

/// Whole names that steer a serve's device and threads.
pub(crate) const NAMES: &[&str] = &[
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
];

/// Words in a name that mark a secret (`HF_TOKEN`, `OLLAMA_API_KEY`): named in a comment, never written.
const SECRET_WORDS: &[&str] = &["TOKEN", "KEY", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH"];

/// The variables of `vars` (name, value; init's environment) the written gate carries: `(written, secrets)`,
/// the first sorted by name with their values, the second the names of the secret ones, sorted. Variables
/// with an empty value are left out (unset and empty mean the same to the engines read).
pub(crate) fn serve_env(
    vars: impl Iterator<Item = (String, String)>,
) -> (Vec<(String, String)>, Vec<String>) {
    let mut written = Vec::new();
    let mut secrets = Vec::new();
    for (name, value) in vars {
        let steers = NAMES.contains(&name.as_str()) || PREFIXES.iter().any(|p| name.starts_with(p));
        if !steers || value.is_empty() {
            continue;
        }
        let upper = name.to_ascii_uppercase();
        if SECRET_WORDS.iter().any(|w| upper.contains(w)) {
            secrets.push(name);
        } else {
            written.push((name, value));
        }
    }
    written.sort();
    secrets.sort();
    (written, secrets)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(v: &[(&str, &str)]) -> impl Iterator<Item = (String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn steering_variables_are_kept_secrets_named_others_left() {
        let (written, secrets) = serve_env(vars(&[
            ("PATH", "/usr/bin"),
            ("VLLM_TARGET_DEVICE", "cpu"),
            ("HF_HUB_OFFLINE", "1"),
            ("HF_TOKEN", "hf_abc"),
            ("OLLAMA_API_KEY", "k"),
            ("OMP_NUM_THREADS", "2"),
            ("LLAMA_ARG_THREADS", ""),
            ("HOME", "/root"),
            ("MY_HF_HOME", "/x"),
        ]));
        assert_eq!(
            written,
            [
                ("HF_HUB_OFFLINE".to_string(), "1".to_string()),
                ("OMP_NUM_THREADS".to_string(), "2".to_string()),
                ("VLLM_TARGET_DEVICE".to_string(), "cpu".to_string()),
            ]
        );
        assert_eq!(secrets, ["HF_TOKEN", "OLLAMA_API_KEY"]);
    }
}
