//! The OpenAI objects of the `shape` check as JSON Schemas, written from the API reference
//! (<https://platform.openai.com/docs/api-reference/chat/object>, `/chat/streaming` and
//! <https://platform.openai.com/docs/guides/error-codes>; docs/contract.md quotes each field): the chat
//! completion object, the chat completion chunk object and the error body. Only what the reference marks
//! required is required; an optional field, when present, must have its type. Extra fields are allowed (the
//! reference's objects grow; llama.cpp adds `timings`). Validation is the `jsonschema` crate's, pure.

use serde_json::{json, Value};

/// `finish_reason` values the reference lists (`function_call` is deprecated but still listed).
const FINISH: [&str; 5] = [
    "stop",
    "length",
    "tool_calls",
    "content_filter",
    "function_call",
];

/// `usage`: the completion usage object (prompt, completion and total tokens, integers ≥ 0).
fn usage() -> Value {
    json!({
        "type": "object",
        "required": ["prompt_tokens", "completion_tokens", "total_tokens"],
        "properties": {
            "prompt_tokens": {"type": "integer", "minimum": 0},
            "completion_tokens": {"type": "integer", "minimum": 0},
            "total_tokens": {"type": "integer", "minimum": 0}
        }
    })
}

/// The chat completion object (`POST /v1/chat/completions`, `stream = false`).
pub fn completion() -> Value {
    json!({
        "type": "object",
        "required": ["id", "object", "created", "model", "choices", "usage"],
        "properties": {
            "id": {"type": "string"},
            "object": {"const": "chat.completion"},
            "created": {"type": "integer"},
            "model": {"type": "string"},
            "system_fingerprint": {"type": ["string", "null"]},
            "usage": usage(),
            "choices": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["index", "message", "finish_reason"],
                    "properties": {
                        "index": {"type": "integer", "minimum": 0},
                        "finish_reason": {"enum": FINISH},
                        "logprobs": {"type": ["object", "null"]},
                        "message": {
                            "type": "object",
                            "required": ["role", "content"],
                            "properties": {
                                "role": {"const": "assistant"},
                                "content": {"type": ["string", "null"]},
                                "refusal": {"type": ["string", "null"]},
                                "tool_calls": {"type": "array"}
                            }
                        }
                    }
                }
            }
        }
    })
}

/// The chat completion chunk object (each `data:` event of a stream before `[DONE]`). `choices` may be
/// empty (the usage chunk of `stream_options.include_usage`); `usage` is null or the usage object.
pub fn chunk() -> Value {
    let mut finish: Vec<Value> = FINISH.iter().map(|f| json!(f)).collect();
    finish.push(Value::Null);
    json!({
        "type": "object",
        "required": ["id", "object", "created", "model", "choices"],
        "properties": {
            "id": {"type": "string"},
            "object": {"const": "chat.completion.chunk"},
            "created": {"type": "integer"},
            "model": {"type": "string"},
            "system_fingerprint": {"type": ["string", "null"]},
            "usage": {"anyOf": [{"type": "null"}, usage()]},
            "choices": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["index", "delta", "finish_reason"],
                    "properties": {
                        "index": {"type": "integer", "minimum": 0},
                        "finish_reason": {"enum": finish},
                        "logprobs": {"type": ["object", "null"]},
                        "delta": {
                            "type": "object",
                            "properties": {
                                "role": {"type": "string"},
                                "content": {"type": ["string", "null"]},
                                "refusal": {"type": ["string", "null"]},
                                "tool_calls": {"type": "array"}
                            }
                        }
                    }
                }
            }
        }
    })
}

/// The error body: `{"error": {"message", "type", "param", "code"}}`. `message` and `type` strings;
/// `param` a string or null; `code` a string or null in the reference, and an integer allowed too (llama.cpp
/// and vLLM send the HTTP status there; both OpenAI SDKs read `code` without a type, so no client breaks).
pub fn error() -> Value {
    json!({
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["message", "type"],
                "properties": {
                    "message": {"type": "string"},
                    "type": {"type": "string"},
                    "param": {"type": ["string", "null"]},
                    "code": {"type": ["string", "integer", "null"]}
                }
            }
        }
    })
}

/// Why `instance` does not match `schema` (the first error, with its JSON pointer), or None when it does.
pub fn violation(schema: &Value, instance: &Value) -> Option<String> {
    let validator = match jsonschema::validator_for(schema) {
        Ok(v) => v,
        Err(e) => return Some(format!("the schema itself is invalid: {e}")),
    };
    let e = validator.iter_errors(instance).next()?;
    let at = e.instance_path().to_string();
    Some(if at.is_empty() {
        e.to_string()
    } else {
        format!("{at}: {e}")
    })
}

/// One entry of `message.tool_calls` (the chat completion message tool call): `id` a string, `type`
/// `"function"`, `function` `{name, arguments}` strings
/// (<https://platform.openai.com/docs/api-reference/chat/object>: "arguments: The arguments to call the
/// function with, as generated by the model in JSON format").
pub fn tool_call() -> Value {
    json!({
        "type": "object",
        "required": ["id", "type", "function"],
        "properties": {
            "id": {"type": "string", "minLength": 1},
            "type": {"const": "function"},
            "function": {
                "type": "object",
                "required": ["name", "arguments"],
                "properties": {
                    "name": {"type": "string"},
                    "arguments": {"type": "string"}
                }
            }
        }
    })
}

/// The legacy completion object (`POST /v1/completions`,
/// <https://platform.openai.com/docs/api-reference/completions/object>): `id`, `object`
/// `"text_completion"`, `created`, `model`, `choices` of `{text, index, logprobs, finish_reason stop |
/// length | content_filter}`, `usage` when present. A streamed chunk is the same object ("the same as the
/// completion object", `finish_reason` null until the last); `streamed` selects it.
pub fn text_completion(streamed: bool) -> Value {
    let mut finish = vec![json!("stop"), json!("length"), json!("content_filter")];
    if streamed {
        finish.push(Value::Null);
    }
    let mut required = vec!["id", "object", "created", "model", "choices"];
    if !streamed {
        required.push("usage");
    }
    json!({
        "type": "object",
        "required": required,
        "properties": {
            "id": {"type": "string"},
            "object": {"const": "text_completion"},
            "created": {"type": "integer"},
            "model": {"type": "string"},
            "system_fingerprint": {"type": ["string", "null"]},
            "usage": {"anyOf": [{"type": "null"}, usage()]},
            "choices": {
                "type": "array",
                "minItems": if streamed { 0 } else { 1 },
                "items": {
                    "type": "object",
                    "required": ["text", "index", "finish_reason"],
                    "properties": {
                        "text": {"type": "string"},
                        "index": {"type": "integer", "minimum": 0},
                        "logprobs": {"type": ["object", "null"]},
                        "finish_reason": {"enum": finish}
                    }
                }
            }
        }
    })
}

/// The embeddings response (`POST /v1/embeddings`,
/// <https://platform.openai.com/docs/api-reference/embeddings/object>): `object` `"list"`, `data` of
/// `{object "embedding", embedding [number], index}`, `model`, `usage {prompt_tokens, total_tokens}`.
pub fn embedding_list() -> Value {
    json!({
        "type": "object",
        "required": ["object", "data", "model", "usage"],
        "properties": {
            "object": {"const": "list"},
            "model": {"type": "string"},
            "usage": {
                "type": "object",
                "required": ["prompt_tokens", "total_tokens"],
                "properties": {
                    "prompt_tokens": {"type": "integer", "minimum": 0},
                    "total_tokens": {"type": "integer", "minimum": 0}
                }
            },
            "data": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["object", "embedding", "index"],
                    "properties": {
                        "object": {"const": "embedding"},
                        "index": {"type": "integer", "minimum": 0},
                        "embedding": {"type": "array", "minItems": 1, "items": {"type": "number"}}
                    }
                }
            }
        }
    })
}

/// The model list (`GET /v1/models`, <https://platform.openai.com/docs/api-reference/models/list>):
/// `object` `"list"`, `data` of model objects `{id, object "model", created, owned_by}`.
pub fn model_list() -> Value {
    json!({
        "type": "object",
        "required": ["object", "data"],
        "properties": {
            "object": {"const": "list"},
            "data": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["id", "object", "created", "owned_by"],
                    "properties": {
                        "id": {"type": "string"},
                        "object": {"const": "model"},
                        "created": {"type": "integer"},
                        "owned_by": {"type": "string"}
                    }
                }
            }
        }
    })
}

/// The Responses API's response object (`POST /v1/responses`,
/// <https://platform.openai.com/docs/api-reference/responses/object>): `id`, `object "response"`,
/// `created_at`, `status` (`completed`, `failed`, `in_progress`, `cancelled`, `queued` or `incomplete`),
/// `model`, and `output`, an array of output items each with a `type`; a `message` item has `role
/// "assistant"` and `content`, an array of parts each with a `type` (an `output_text` part has `text`);
/// `usage`, when present, `{input_tokens, output_tokens, total_tokens}` integers ≥ 0.
pub fn response_object() -> Value {
    json!({
        "type": "object",
        "required": ["id", "object", "created_at", "status", "model", "output"],
        "properties": {
            "id": {"type": "string"},
            "object": {"const": "response"},
            "created_at": {"type": "number"},
            "status": {"enum": ["completed", "failed", "in_progress", "cancelled", "queued", "incomplete"]},
            "model": {"type": "string"},
            "output": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["type"],
                    "properties": {"type": {"type": "string"}},
                    "if": {"properties": {"type": {"const": "message"}}},
                    "then": {
                        "required": ["role", "content"],
                        "properties": {
                            "role": {"const": "assistant"},
                            "content": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "required": ["type"],
                                    "properties": {"type": {"type": "string"}},
                                    "if": {"properties": {"type": {"const": "output_text"}}},
                                    "then": {"required": ["text"], "properties": {"text": {"type": "string"}}}
                                }
                            }
                        }
                    }
                }
            },
            "usage": {
                "type": ["object", "null"],
                "required": ["input_tokens", "output_tokens", "total_tokens"],
                "properties": {
                    "input_tokens": {"type": "integer", "minimum": 0},
                    "output_tokens": {"type": "integer", "minimum": 0},
                    "total_tokens": {"type": "integer", "minimum": 0}
                }
            }
        }
    })
}
