//! The rules of the contract checks on the other endpoints (docs/contract.md): the legacy
//! `/v1/completions`, `/v1/embeddings` and `GET /v1/models`, each "where the serve offers them": a 404 or 405
//! at the route (the serve has no such endpoint) or a clean "not supported" error is unsupported, never a
//! pass. Shapes by the JSON Schemas of [`super::schema`], written from the API reference.

use serde_json::Value;

use crate::analysis::contract::ContractExchange;
use crate::analysis::quote::quoted;

use super::{answered_with, body_json, find, schema, stream_events, CheckState, Lack};

type Judged = Result<CheckState, CheckState>;

const ROUTE: Lack = Lack {
    param: None,
    route: true,
};

fn fail(s: impl Into<String>) -> Judged {
    Ok(CheckState::Fail(s.into()))
}

/// `completions`: `POST /v1/completions`, greedy: `body` is the completion object
/// (<https://platform.openai.com/docs/api-reference/completions/object>), every event of `stream` before
/// `[DONE]` the same object as a chunk ("Streamed completions return the same completion object"), and the
/// streamed text and finish_reason are the body's.
pub(super) fn completions(xs: &[ContractExchange]) -> Judged {
    let body = find(xs, "body")?;
    answered_with(body, ROUTE)?;
    if let Some(v) = schema::violation(&schema::text_completion(false), &body_json(body)) {
        return fail(format!("`body` is no completion object: {v}"));
    }
    let stream = find(xs, "stream")?;
    answered_with(stream, ROUTE)?;
    if !stream.reply.streamed {
        return fail("`stream` (stream = true) was not answered as an SSE stream");
    }
    let events = stream_events(stream);
    let chunk = schema::text_completion(true);
    for (i, e) in events.iter().enumerate() {
        if let Some(v) = schema::violation(&chunk, e) {
            return fail(format!(
                "`stream` chunk {} of {} is no completion object: {v}",
                i + 1,
                events.len()
            ));
        }
    }
    let (a, b) = (&body.reply, &stream.reply);
    if a.content != b.content {
        return fail(format!(
            "the greedy texts differ: `body` {} / `stream` {}",
            quoted(&a.content, 80),
            quoted(&b.content, 80)
        ));
    }
    if a.finish_reason != b.finish_reason {
        return fail(format!(
            "finish_reason differs: `body` {:?} / `stream` {:?}",
            a.finish_reason, b.finish_reason
        ));
    }
    Ok(CheckState::Pass(format!(
        "the completion object, {} stream chunks of it, the same text {} and finish_reason {:?} streamed and not",
        events.len(),
        quoted(&a.content, 40),
        a.finish_reason.as_deref().unwrap_or("none")
    )))
}

/// The embedding vectors of an embeddings response, by `index` (ascending), each as numbers.
fn vectors(v: &Value) -> Vec<(u64, Vec<f64>)> {
    let mut out: Vec<(u64, Vec<f64>)> = v["data"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| {
            (
                d["index"].as_u64().unwrap_or(u64::MAX),
                d["embedding"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_f64)
                    .collect(),
            )
        })
        .collect();
    out.sort_by_key(|(i, _)| *i);
    out
}

/// How far two embeddings of the same input may differ, relative to the larger magnitude (float rounding
/// between two runs of the same kernels).
const SAME_EMBEDDING: f64 = 1e-4;

/// `embeddings`: `POST /v1/embeddings`: each response is the embedding list object
/// (<https://platform.openai.com/docs/api-reference/embeddings/object>: `data` of `{object "embedding",
/// embedding, index}`, `model`, `usage`), every vector of one dimension and finite; `again` (the same input)
/// repeats `first` (each component within 1e-4 of the larger magnitude); `batch` (two inputs) gives two
/// vectors, indexed 0 and 1.
pub(super) fn embeddings(xs: &[ContractExchange]) -> Judged {
    let mut dims = Vec::new();
    let mut got = Vec::new();
    for label in ["first", "again", "batch"] {
        let x = find(xs, label)?;
        answered_with(x, ROUTE)?;
        let v = body_json(x);
        if let Some(e) = schema::violation(&schema::embedding_list(), &v) {
            return fail(format!("`{label}` is no embedding list: {e}"));
        }
        let vs = vectors(&v);
        for (i, vec) in &vs {
            if vec.iter().any(|f| !f.is_finite()) {
                return fail(format!(
                    "`{label}`: embedding {i} holds a number that is not finite"
                ));
            }
            dims.push(vec.len());
        }
        got.push(vs);
    }
    if dims.iter().any(|d| *d != dims[0]) {
        return fail(format!("the embeddings are not of one dimension: {dims:?}"));
    }
    let (first, again, batch) = (&got[0], &got[1], &got[2]);
    if first.len() != 1 || again.len() != 1 {
        return fail(format!(
            "one input gave {} and {} embeddings, not one",
            first.len(),
            again.len()
        ));
    }
    let (a, b) = (&first[0].1, &again[0].1);
    let scale = a.iter().chain(b).fold(1e-12_f64, |m, f| m.max(f.abs()));
    let worst = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0_f64, f64::max);
    if worst > SAME_EMBEDDING * scale {
        return fail(format!(
            "`again` (the same input) differs from `first` by {worst:.3e} at most, over {SAME_EMBEDDING:.0e} of the magnitude {scale:.3e}: not repeatable"
        ));
    }
    let indexes: Vec<u64> = batch.iter().map(|(i, _)| *i).collect();
    if indexes != [0, 1] {
        return fail(format!(
            "`batch` (two inputs) gave embeddings indexed {indexes:?}, not 0 and 1"
        ));
    }
    Ok(CheckState::Pass(format!(
        "the embedding list object, dimension {}, `again` within {worst:.1e} of `first`, `batch` indexed 0 and 1",
        dims[0]
    )))
}

/// `models`: `GET /v1/models` is the model list (<https://platform.openai.com/docs/api-reference/models/list>:
/// `object "list"`, `data` of `{id, object "model", created, owned_by}`) and lists the gate's
/// `served_model` (an id equal to it, or with the same last path component, case-insensitively).
pub(super) fn models(xs: &[ContractExchange], served_model: &str) -> Judged {
    let list = find(xs, "list")?;
    answered_with(list, ROUTE)?;
    let v = body_json(list);
    if let Some(e) = schema::violation(&schema::model_list(), &v) {
        return fail(format!("`list` is no model list: {e}"));
    }
    let ids: Vec<String> = v["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["id"].as_str().map(str::to_string))
        .collect();
    if crate::analysis::reply::model_served(served_model, &ids) != Some(true) {
        return fail(format!(
            "`list` does not list the served model {}: {}",
            quoted(served_model, 40),
            quoted(&ids.join(", "), 120)
        ));
    }
    Ok(CheckState::Pass(format!(
        "the model list object, {} model(s) ({}), the served model {} among them",
        ids.len(),
        quoted(&ids.join(", "), 80),
        quoted(served_model, 40)
    )))
}

/// The output text of a response object: the `text` of every `output_text` part of every `message` item,
/// in order (what the SDKs' `output_text` joins); None when no message item has such a part.
fn output_text(v: &Value) -> Option<String> {
    let mut parts = v["output"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|item| item["type"] == "message")
        .flat_map(|item| item["content"].as_array().into_iter().flatten())
        .filter(|part| part["type"] == "output_text")
        .filter_map(|part| part["text"].as_str())
        .peekable();
    parts.peek()?;
    Some(parts.collect())
}

/// The data of every event of a streamed body (any `event:` name), each parsed as JSON, up to a `[DONE]`
/// (the Responses API sends none; a serve that adds one ends there); the index of one that is not JSON.
fn all_events(x: &ContractExchange) -> Result<Vec<Value>, usize> {
    let mut framer = crate::analysis::sse::Framer::new();
    let mut out = Vec::new();
    for (i, e) in framer.push(&x.body, 0.0).into_iter().enumerate() {
        if e.data.trim() == "[DONE]" {
            break;
        }
        out.push(serde_json::from_str(&e.data).map_err(|_| i + 1)?);
    }
    Ok(out)
}

/// `responses`: `POST /v1/responses` (<https://platform.openai.com/docs/api-reference/responses/create>),
/// greedy. `body` is the response object ([`schema::response_object`]), `completed` or `incomplete`, with
/// output text; `stream` is the streamed events: the first `response.created`, text in
/// `response.output_text.delta` events ("Emitted when there is an additional text delta"), the last
/// `response.completed` or `response.incomplete` carrying the response object, whose output text the deltas
/// join to; the streamed text is `body`'s, and `body`'s is `chat`'s (the same prompt to the chat endpoint,
/// greedy). A 404 or 405 is the serve without the route: unsupported.
pub(super) fn responses(xs: &[ContractExchange]) -> Judged {
    let body = find(xs, "body")?;
    answered_with(body, ROUTE)?;
    let v = body_json(body);
    if let Some(e) = schema::violation(&schema::response_object(), &v) {
        return fail(format!("`body` is no response object: {e}"));
    }
    let status = v["status"].as_str().unwrap_or_default();
    if status != "completed" && status != "incomplete" {
        return fail(format!(
            "`body` has status {}, not \"completed\" (or \"incomplete\" at max_output_tokens)",
            quoted(status, 20)
        ));
    }
    let Some(text) = output_text(&v) else {
        return fail("`body` has no message item with an output_text part");
    };
    let stream = find(xs, "stream")?;
    if let Some(e) = &stream.record.transport_error {
        return fail(format!("`stream`: no whole reply: {e}"));
    }
    if stream.record.body_truncated {
        return fail("`stream`: the body passed the cap and was not read whole");
    }
    let st = stream.record.http_status.unwrap_or(0);
    if !(200..300).contains(&st) {
        answered_with(stream, ROUTE)?;
    }
    let events = match all_events(stream) {
        Ok(e) => e,
        Err(i) => return fail(format!("`stream` event {i} is not JSON")),
    };
    let kind = |e: &Value| e["type"].as_str().unwrap_or("").to_string();
    let (Some(first), Some(last)) = (events.first(), events.last()) else {
        return fail("`stream` (stream = true) holds no event");
    };
    if kind(first) != "response.created" {
        return fail(format!(
            "`stream`'s first event is {}, not \"response.created\"",
            quoted(&kind(first), 40)
        ));
    }
    if !matches!(
        kind(last).as_str(),
        "response.completed" | "response.incomplete"
    ) {
        return fail(format!(
            "`stream`'s last event is {}, not \"response.completed\": a cut or failed stream",
            quoted(&kind(last), 40)
        ));
    }
    if let Some(e) = schema::violation(&schema::response_object(), &last["response"]) {
        return fail(format!(
            "`stream`'s {} carries no response object: {e}",
            kind(last)
        ));
    }
    let deltas: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "response.output_text.delta")
        .collect();
    if let Some(bad) = deltas.iter().find(|e| !e["delta"].is_string()) {
        return fail(format!(
            "a `response.output_text.delta` event has no string `delta`: {}",
            quoted(&bad.to_string(), 80)
        ));
    }
    let streamed: String = deltas.iter().filter_map(|e| e["delta"].as_str()).collect();
    let done = output_text(&last["response"]).unwrap_or_default();
    if streamed != done {
        return fail(format!(
            "the {} output_text deltas join to {}, the completed response's text is {}",
            deltas.len(),
            quoted(&streamed, 60),
            quoted(&done, 60)
        ));
    }
    if streamed != text {
        return fail(format!(
            "the greedy texts differ: `body` {} / `stream` {}",
            quoted(&text, 60),
            quoted(&streamed, 60)
        ));
    }
    let chat = find(xs, "chat")?;
    super::answered(chat)?;
    if chat.reply.content != text {
        return fail(format!(
            "the Responses API's greedy text {} is not chat's {} for the same prompt",
            quoted(&text, 60),
            quoted(&chat.reply.content, 60)
        ));
    }
    Ok(CheckState::Pass(format!(
        "the response object ({status}), {} stream events from response.created to {} with {} text deltas, the same text {} as chat's",
        events.len(),
        kind(last),
        deltas.len(),
        quoted(&text, 40)
    )))
}
