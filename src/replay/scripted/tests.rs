use super::*;

fn vars() -> Vars {
    Vars {
        host: "127.0.0.1".into(),
        port: 8080,
        n: 3,
        chat: 2,
        method: "POST".into(),
        path: "/v1/chat/completions".into(),
        status: 200,
        headers: vec![("authorization".into(), "Bearer k".into())],
        vars: vec![("model".into(), "m\u{1b}x".into())],
    }
}

/// Every byte written, in order (the terminal step ignored).
fn wire(steps: &[Step]) -> String {
    let mut out = Vec::new();
    for s in steps {
        if let Step::Write(_, b) = s {
            out.extend_from_slice(b);
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn writes(steps: &[Step]) -> Vec<(f64, String)> {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::Write(t, b) => Some((*t, String::from_utf8_lossy(b).into_owned())),
            _ => None,
        })
        .collect()
}

/// The body of a chunked response, de-chunked.
fn dechunk(wire: &str) -> String {
    let body = &wire[wire.find("\r\n\r\n").map(|i| i + 4).unwrap_or(0)..];
    let mut out = String::new();
    let mut rest = body;
    while let Some(i) = rest.find("\r\n") {
        let Ok(n) = usize::from_str_radix(&rest[..i], 16) else {
            break;
        };
        if n == 0 {
            break;
        }
        out.push_str(&rest[i + 2..i + 2 + n]);
        rest = &rest[i + 2 + n + 2..];
    }
    out
}

#[test]
fn default_stream_is_chunked_sse_with_role_tokens_finish_usage_and_done() {
    let steps = render_reply(&Reply::default(), true, "m", &vars());
    let w = wire(&steps);
    assert!(
        w.starts_with(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
        ),
        "{w}"
    );
    assert!(w.ends_with("0\r\n\r\n"), "{w}");
    let body = dechunk(&w);
    let events: Vec<&str> = body.split_terminator("\n\n").collect();
    assert_eq!(events.len(), 6, "{body}");
    assert!(events[0].contains(r#""role":"assistant""#));
    assert!(events[1].contains(r#""content":"Paris""#) && events[1].contains(r#""model":"m""#));
    assert!(events[3].contains(r#""finish_reason":"stop""#));
    assert!(
        events[4].contains(r#""choices":[]"#) && events[4].contains(r#""completion_tokens":2"#)
    );
    assert_eq!(events[5], "data: [DONE]");
    assert_eq!(steps.last(), Some(&Step::End));
}

#[test]
fn delays_place_the_head_first_token_and_gaps_in_ms_from_arrival() {
    let r = Reply {
        head_delay_ms: 10.0,
        first_token_ms: 5.0,
        token_ms: 2.5,
        tokens: vec!["a".into(), "b".into(), "c".into()],
        ..Reply::default()
    };
    let times: Vec<f64> = writes(&render_reply(&r, true, "m", &vars()))
        .iter()
        .map(|(t, _)| *t)
        .collect();
    // head+role, a, b, c, trailer (finish, usage, DONE), last chunk.
    assert_eq!(times, vec![10.0, 15.0, 17.5, 20.0, 20.0, 20.0]);
}

#[test]
fn a_burst_puts_several_chunks_in_one_write_at_its_last_tokens_time() {
    let r = Reply {
        token_ms: 1.0,
        tokens: vec!["a".into(), "b".into(), "c".into(), "d".into()],
        per_write: 2,
        ..Reply::default()
    };
    let w = writes(&render_reply(&r, true, "m", &vars()));
    assert_eq!(w[1].0, 1.0);
    assert_eq!(w[1].1.matches("data: ").count(), 2, "{}", w[1].1);
    assert_eq!(w[2].0, 3.0);
    let all = Reply { per_write: 0, ..r };
    let w = writes(&render_reply(&all, true, "m", &vars()));
    assert_eq!((w[1].0, w[1].1.matches("data: ").count()), (3.0, 4));
}

#[test]
fn cut_after_two_events_closes_without_the_last_chunk() {
    let r = Reply {
        cut_after: Some(2),
        ..Reply::default()
    };
    let steps = render_reply(&r, true, "m", &vars());
    assert_eq!(steps.last(), Some(&Step::Close));
    let w = wire(&steps);
    assert!(!w.ends_with("0\r\n\r\n"), "{w}");
    let body = dechunk(&w);
    assert_eq!(body.matches("data: ").count(), 2, "{body}");
    assert!(!body.contains("[DONE]"));
}

#[test]
fn cut_inside_a_burst_keeps_whole_events() {
    let r = Reply {
        tokens: vec!["a".into(), "b".into(), "c".into()],
        per_write: 0,
        role_chunk: false,
        cut_after: Some(2),
        ..Reply::default()
    };
    let body = dechunk(&wire(&render_reply(&r, true, "m", &vars())));
    assert_eq!(body.matches("data: ").count(), 2, "{body}");
    assert!(body.ends_with("\n\n"));
}

#[test]
fn stall_and_crash_end_the_steps_as_scripted() {
    let r = Reply {
        stall_after: Some(1),
        ..Reply::default()
    };
    assert_eq!(
        render_reply(&r, true, "m", &vars()).last(),
        Some(&Step::Stall)
    );
    let r = Reply {
        crash_after: Some(3),
        crash: Some(Crash::Code(3)),
        ..Reply::default()
    };
    let steps = render_reply(&r, true, "m", &vars());
    assert_eq!(steps.last(), Some(&Step::Crash(Crash::Code(3))));
    assert_eq!(dechunk(&wire(&steps)).matches("data: ").count(), 3);
    let r = Reply {
        crash_after: Some(0),
        ..Reply::default()
    };
    assert_eq!(
        render_reply(&r, true, "m", &vars()).last(),
        Some(&Step::Crash(Crash::Signal(libc::SIGKILL)))
    );
}

#[test]
fn non_stream_reply_is_one_json_body_with_content_length() {
    let r = Reply {
        timings: Some(serde_json::json!({"predicted_per_second": 50.0})),
        head_delay_ms: 7.0,
        ..Reply::default()
    };
    let steps = render_reply(&r, false, "m", &vars());
    let w = writes(&steps);
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].0, 7.0);
    let (head, body) = w[0].1.split_once("\r\n\r\n").unwrap();
    assert!(
        head.contains(&format!("content-length: {}", body.len())),
        "{head}"
    );
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "Paris.");
    assert_eq!(v["usage"]["total_tokens"], 11);
    assert_eq!(v["timings"]["predicted_per_second"], 50.0);
}

#[test]
fn status_headers_and_templates_are_applied() {
    let r = Reply {
        status: 500,
        headers: vec![("x-echo".into(), "{header:Authorization} #{chat}".into())],
        ..Reply::default()
    };
    let w = wire(&render_reply(&r, true, "m", &vars()));
    assert!(w.starts_with("HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\nx-echo: Bearer k #2\r\n"), "{w}");
    assert!(dechunk(&w).contains(r#""code":500"#), "{w}");
    assert_eq!(
        vars().expand("{host}:{port} {n} {method} {path} {status} {nope} {"),
        "127.0.0.1:8080 3 POST /v1/chat/completions 200 {nope} {"
    );
}

#[test]
fn raw_body_inject_and_close_framing_are_verbatim() {
    let r = Reply {
        body: Some("\u{1}not json".into()),
        framing: Some(Body::Close),
        ..Reply::default()
    };
    let steps = render_reply(&r, true, "m", &vars());
    assert!(wire(&steps).ends_with("connection: close\r\n\r\n\u{1}not json"));
    assert_eq!(steps.last(), Some(&Step::Close));
    let r = Reply {
        inject: vec![
            Inject {
                at: 1,
                raw: "data: {broken\n\n".into(),
            },
            Inject {
                at: 99,
                raw: ": tail\n\n".into(),
            },
        ],
        ..Reply::default()
    };
    let body = dechunk(&wire(&render_reply(&r, true, "m", &vars())));
    let events: Vec<&str> = body.split_terminator("\n\n").collect();
    assert_eq!(events[1], "data: {broken");
    assert_eq!(events.last(), Some(&": tail"));
}

#[test]
fn declared_length_and_forever_make_a_body_that_never_ends() {
    let r = Reply {
        framing: Some(Body::Length),
        content_length: Some(4 << 30),
        forever: Some(Forever {
            bytes: "x".into(),
            repeat: 4,
            every_ms: 0.0,
        }),
        ..Reply::default()
    };
    let steps = render_reply(&r, true, "m", &vars());
    assert!(wire(&steps).contains("content-length: 4294967296\r\n"));
    assert_eq!(steps.last(), Some(&Step::Forever(0.0, b"xxxx".to_vec())));
}

#[test]
fn replies_by_index_then_default_or_cycled() {
    let mut s = Script {
        replies: vec![
            Reply {
                status: 500,
                ..Reply::default()
            },
            Reply::default(),
        ],
        ..Script::default()
    };
    assert_eq!(s.reply_for(0).status, 500);
    assert_eq!(s.reply_for(2).status, 200);
    s.cycle = true;
    assert_eq!(s.reply_for(2).status, 500);
}

#[test]
fn scripts_round_trip_through_json_and_toml_and_refuse_unknown_fields() {
    let s = Script {
        version: Some("b1234".into()),
        crash_after_requests: Some(CrashAfter {
            requests: 3,
            how: Crash::Signal(11),
        }),
        term: Term::Exit {
            code: 0,
            log: vec![LogLine::out("bye")],
        },
        ..Script::default()
    };
    let back = Script::parse(&s.to_json(), Path::new("s.json")).unwrap();
    assert_eq!(back, s);
    let t = Script::parse(
        "models = [\"a\"]\n[reply]\ntokens = [\"x\"]\ntoken_ms = 4\n[[start.log]]\ntext = \"hi\"\n",
        Path::new("s.toml"),
    )
    .unwrap();
    assert_eq!(
        (t.models[0].as_str(), t.reply.token_ms, t.start.log[0].to),
        ("a", 4.0, To::Stderr)
    );
    let e = Script::parse(r#"{"reply": {"tokenz": []}}"#, Path::new("s.json")).unwrap_err();
    assert!(e.contains("tokenz"), "{e}");
    let bad = Script {
        reply: Reply {
            token_ms: -1.0,
            ..Reply::default()
        },
        ..Script::default()
    };
    assert!(bad.validate().unwrap_err().contains("token_ms"));
}

#[test]
fn var_templates_expand_from_the_command_line_pairs_and_are_empty_when_not_given() {
    assert_eq!(
        vars().expand("model {var:model} x{var:nope}y"),
        "model m\u{1b}x xy"
    );
}

#[test]
fn noise_is_a_fixed_body_of_bytes_that_are_not_utf8() {
    let reply = Reply {
        noise: Some(1000),
        framing: Some(Body::Close),
        ..Reply::default()
    };
    let steps = render_reply(&reply, true, "m", &vars());
    let mut body = Vec::new();
    for s in &steps {
        if let Step::Write(_, b) = s {
            body.extend_from_slice(b);
        }
    }
    let head_end = body.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let body = &body[head_end..];
    assert_eq!(body, noise(1000).as_slice());
    assert!(std::str::from_utf8(body).is_err());
    assert_eq!(noise(7), noise(1000)[..7]);
    assert_eq!(steps.last(), Some(&Step::Close));
}

#[test]
fn a_split_cuts_the_write_holding_its_text_in_the_middle_of_it() {
    let reply = Reply {
        tokens: vec!["Paris. You sent {header:authorization}".into()],
        split: Some(Split {
            at: "{header:authorization}".into(),
            delay_ms: 50.0,
        }),
        role_chunk: false,
        ..Reply::default()
    };
    let w = writes(&render_reply(&reply, true, "m", &vars()));
    let i = w
        .iter()
        .position(|(_, b)| b.ends_with("You sent Bear"))
        .unwrap_or_else(|| panic!("{w:?}"));
    assert!(w[i + 1].1.starts_with("er k\""), "{w:?}");
    assert_eq!(w[i + 1].0, w[i].0 + 50.0);
    assert!(w[i + 2..].iter().all(|(t, _)| *t >= w[i].0 + 50.0), "{w:?}");
    // The whole is unchanged.
    let plain = Reply {
        split: None,
        ..reply.clone()
    };
    assert_eq!(
        wire(&render_reply(&reply, true, "m", &vars())),
        wire(&render_reply(&plain, true, "m", &vars()))
    );
}

#[test]
fn byte_tags_are_raw_bytes_in_header_values_and_nothing_else_changes() {
    assert_eq!(
        raw_bytes(b"a{byte:ff}b{byte:0A}{byte:zz}{byte:f}"),
        b"a\xffb\n{byte:zz}{byte:f}".to_vec()
    );
    let reply = Reply {
        headers: vec![("x-odd".into(), "v{byte:80}{byte:fe}".into())],
        ..Reply::default()
    };
    let steps = render_reply(&reply, true, "m", &vars());
    let Step::Write(_, head) = &steps[0] else {
        panic!("{steps:?}")
    };
    assert!(
        head.windows(10).any(|w| w == b"x-odd: v\x80\xfe"),
        "{}",
        String::from_utf8_lossy(head)
    );
}

/// `crash_log` and `term = {crash = ...}` as a test writes them in JSON: a serve's last words before a
/// scripted crash, and a serve that dies of a signal when asked to stop (played in
/// tests/cli/scripted_serve.rs).
#[test]
fn crash_log_and_a_crash_on_sigterm_parse_and_round_trip() {
    let s = Script::parse(
        r#"{"crash_log": [{"text": "Segmentation fault"}],
            "term": {"crash": {"how": {"signal": 11}, "log": [{"text": "caught SIGTERM", "to": "stdout"}]}}}"#,
        Path::new("s.json"),
    )
    .unwrap();
    assert_eq!(s.crash_log, vec![LogLine::err("Segmentation fault")]);
    assert_eq!(
        s.term,
        Term::Crash {
            how: Crash::Signal(11),
            log: vec![LogLine::out("caught SIGTERM")],
        }
    );
    assert_eq!(Script::parse(&s.to_json(), Path::new("s.json")).unwrap(), s);
    // Both default to nothing: a crash prints no last words, SIGTERM its default action.
    let d = Script::parse("{}", Path::new("s.json")).unwrap();
    assert!(d.crash_log.is_empty() && d.term == Term::Default);
    let e = Script::parse(r#"{"term": {"crash": {"log": []}}}"#, Path::new("s.json")).unwrap_err();
    assert!(e.contains("how"), "{e}");
}
