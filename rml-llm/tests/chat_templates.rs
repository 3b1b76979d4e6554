//! Chat templates rendered by rml-llm must equal what `transformers` (Jinja2) renders,
//! on the committed fixtures of `scripts/fixtures/llm_chat_templates.py`.

use std::path::PathBuf;

use rml_llm::chat::{ChatTemplate, RenderOptions};
use serde_json::Value;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/chat_templates")
}

#[test]
fn renderings_match_transformers() {
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(dir().join("expected.json")).unwrap())
            .unwrap();
    let cases = expected["cases"].as_array().unwrap();
    let mut failures = Vec::new();
    for case in cases {
        let name = case["template"].as_str().unwrap();
        let source = std::fs::read_to_string(dir().join(format!("{name}.jinja"))).unwrap();
        let template = ChatTemplate::new(&source).unwrap();
        let conv = case["conversation"].as_str().unwrap();
        let options = RenderOptions {
            add_generation_prompt: case["add_generation_prompt"].as_bool().unwrap(),
            bos_token: expected["bos_token"].as_str().unwrap().to_string(),
            eos_token: expected["eos_token"].as_str().unwrap().to_string(),
            tools: case["tools"]
                .as_bool()
                .unwrap()
                .then(|| expected["tools"].clone()),
            ..RenderOptions::default()
        };
        let got = template.render(&expected["conversations"][conv], &options);
        match (case.get("rendered").and_then(Value::as_str), got) {
            (Some(want), Ok(got)) if want == got => {}
            (None, Err(e)) => {
                let want = case["error"].as_str().unwrap();
                if !e.to_string().contains(want) {
                    failures.push(format!("{name}/{conv}: error {e} lacks {want:?}"));
                }
            }
            (want, got) => failures.push(format!(
                "{name}/{conv}/{options:?}:\n  want {want:?}\n  got  {got:?}"
            )),
        }
    }
    assert!(cases.len() >= 58);
    assert!(
        failures.is_empty(),
        "{} of {} differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn errors_name_the_line() {
    let err = ChatTemplate::new("line one\n{% if %}\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("line 2"), "{err}");
    let t = ChatTemplate::new("ok\n\n{{ raise_exception('no system role') }}").unwrap();
    let err = t
        .render(&serde_json::json!([]), &RenderOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("line 3") && err.contains("no system role"),
        "{err}"
    );
}

#[test]
fn python_methods_and_tojson() {
    let t = ChatTemplate::new(
        "{{ messages[0].content.strip().upper() }}|{{ messages[0] | tojson }}|{{ {'b': [1, 2.5, none]} | tojson(indent=2) }}|{{ strftime_now('%Y') | length }}",
    )
    .unwrap();
    let out = t
        .render(
            &serde_json::json!([{"content": "  hi <b> ", "role": "user"}]),
            &RenderOptions::default(),
        )
        .unwrap();
    assert_eq!(
        out,
        "HI <B>|{\"content\": \"  hi <b> \", \"role\": \"user\"}|{\n  \"b\": [\n    1,\n    2.5,\n    null\n  ]\n}|4"
    );
}

#[test]
fn qwen3_style_reverse_iteration() {
    let t = ChatTemplate::new(
        "{% for m in messages[::-1] %}{{ m.content }}{% endfor %}|{% for i in range(messages|length - 1, -1, -1) %}{{ i }}{% endfor %}|{{ messages[1:]|length }}",
    )
    .unwrap();
    let msgs = serde_json::json!([{"content": "a"}, {"content": "b"}, {"content": "c"}]);
    assert_eq!(
        t.render(&msgs, &RenderOptions::default()).unwrap(),
        "cba|210|2"
    );
}
