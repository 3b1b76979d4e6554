//! Chat templates: a model's own Jinja template rendered with `minijinja`, set up to
//! behave like the reference environment of `transformers` (`apply_chat_template`):
//!
//! - `trim_blocks` and `lstrip_blocks` on, loop controls (`break`/`continue`);
//! - Python string/dict methods (`.strip()`, `.startswith()`, `.items()`, `.get()`, …)
//!   through `minijinja-contrib`'s pycompat callback;
//! - `raise_exception(msg)` fails the render with `msg`;
//! - `strftime_now(fmt)` formats the current UTC time (`%d %b %Y` and friends);
//! - `tojson` writes Python's `json.dumps` layout without HTML escaping (`indent`,
//!   `sort_keys`, `separators` supported);
//! - `{% generation %}` / `{% endgeneration %}` markers are dropped before compiling.
//!
//! A compile or render error names the template line.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use minijinja::syntax::SyntaxConfig;
use minijinja::value::{Kwargs, Serde, ValueKind};
use minijinja::{Environment, Error, ErrorKind, Value};

/// A chat template failure: the message names the line when the engine knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatError {
    message: String,
}

impl ChatError {
    fn from_jinja(e: &Error) -> Self {
        let what = e
            .detail()
            .map_or_else(|| e.kind().to_string(), str::to_string);
        let message = match e.line() {
            Some(line) => format!("chat template error at line {line}: {what}"),
            None => format!("chat template error: {what}"),
        };
        Self { message }
    }
}

impl fmt::Display for ChatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ChatError {}

/// What to render besides the messages.
#[derive(Debug, Clone, Default)]
pub struct RenderOptions {
    /// End with the opening of an assistant turn.
    pub add_generation_prompt: bool,
    /// The text of the BOS token (`bos_token`).
    pub bos_token: String,
    /// The text of the EOS token (`eos_token`).
    pub eos_token: String,
    /// Tool descriptions (`tools`), if any.
    pub tools: Option<serde_json::Value>,
    /// Further variables (`enable_thinking`, `date_string`, …).
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
}

impl fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatTemplate").finish_non_exhaustive()
    }
}

const NAME: &str = "chat_template";

/// Removes `{% generation %}`-style markers (with any whitespace control) from `source`.
fn strip_generation_tags(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    while let Some(open) = rest.find("{%") {
        let Some(close) = rest[open..].find("%}") else {
            break;
        };
        let tag = &rest[open + 2..open + close];
        let word = tag.trim_matches(|c: char| c == '-' || c == '+' || c.is_whitespace());
        out.push_str(&rest[..open]);
        if word != "generation" && word != "endgeneration" {
            out.push_str(&rest[open..open + close + 2]);
        }
        rest = &rest[open + close + 2..];
    }
    out.push_str(rest);
    out
}

impl ChatTemplate {
    /// Compiles a template.
    pub fn new(source: &str) -> Result<Self, ChatError> {
        let mut env = Environment::new();
        let syntax = SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(|e| ChatError::from_jinja(&e))?;
        env.set_syntax(syntax);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        env.add_filter("tojson", tojson);
        env.add_template_owned(NAME, strip_generation_tags(source))
            .map_err(|e| ChatError::from_jinja(&e))?;
        Ok(Self { env })
    }

    /// Renders `messages` (a JSON array of `{role, content, …}` objects).
    pub fn render(
        &self,
        messages: &serde_json::Value,
        options: &RenderOptions,
    ) -> Result<String, ChatError> {
        let mut ctx: BTreeMap<String, Value> = BTreeMap::new();
        for (k, v) in &options.extra {
            ctx.insert(k.clone(), Value::from(Serde(v)));
        }
        ctx.insert("messages".into(), Value::from(Serde(messages)));
        ctx.insert(
            "add_generation_prompt".into(),
            Value::from(options.add_generation_prompt),
        );
        ctx.insert("bos_token".into(), Value::from(options.bos_token.clone()));
        ctx.insert("eos_token".into(), Value::from(options.eos_token.clone()));
        if let Some(t) = &options.tools {
            ctx.insert("tools".into(), Value::from(Serde(t)));
        }
        let tmpl = self
            .env
            .get_template(NAME)
            .map_err(|e| ChatError::from_jinja(&e))?;
        tmpl.render(Value::from(ctx))
            .map_err(|e| ChatError::from_jinja(&e))
    }
}

/// The chat template and special-token texts of a Hugging Face `tokenizer_config.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TokenizerConfig {
    /// The template named `default` (or the only one); `None` when the file has none.
    pub chat_template: Option<String>,
    /// Other named templates (e.g. `tool_use`).
    pub named_templates: BTreeMap<String, String>,
    /// `bos_token` (a string, or the `content` of an added-token object).
    pub bos_token: Option<String>,
    /// `eos_token`, same forms.
    pub eos_token: Option<String>,
}

impl TokenizerConfig {
    /// Parses the text of a `tokenizer_config.json`.
    pub fn from_json_str(text: &str) -> Result<Self, ChatError> {
        let err = |m: String| ChatError {
            message: format!("tokenizer_config.json: {m}"),
        };
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| err(format!("not valid JSON: {e}")))?;
        let token = |key: &str| -> Result<Option<String>, ChatError> {
            match v.get(key) {
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
                Some(o) => match o.get("content").and_then(serde_json::Value::as_str) {
                    Some(s) => Ok(Some(s.to_string())),
                    None => Err(err(format!(
                        "{key}: expected a string or {{\"content\": …}}"
                    ))),
                },
            }
        };
        let mut out = Self {
            bos_token: token("bos_token")?,
            eos_token: token("eos_token")?,
            ..Self::default()
        };
        match v.get("chat_template") {
            None | Some(serde_json::Value::Null) => {}
            Some(serde_json::Value::String(s)) => out.chat_template = Some(s.clone()),
            Some(serde_json::Value::Array(list)) => {
                for (i, item) in list.iter().enumerate() {
                    let name = item.get("name").and_then(serde_json::Value::as_str);
                    let tmpl = item.get("template").and_then(serde_json::Value::as_str);
                    match (name, tmpl) {
                        (Some(n), Some(t)) => {
                            out.named_templates.insert(n.to_string(), t.to_string());
                        }
                        _ => {
                            return Err(err(format!(
                                "chat_template[{i}]: expected {{\"name\", \"template\"}}"
                            )));
                        }
                    }
                }
                out.chat_template = out.named_templates.get("default").cloned().or_else(|| {
                    (list.len() == 1)
                        .then(|| out.named_templates.values().next().cloned())
                        .flatten()
                });
            }
            Some(_) => return Err(err("chat_template: expected a string or a list".to_string())),
        }
        Ok(out)
    }
}

fn raise_exception(message: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message))
}

/// Days since 1970-01-01 to (year, month 1–12, day 1–31), proleptic Gregorian.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Formats a Unix time (UTC) with the common `strftime` directives.
pub fn strftime(secs: i64, fmt: &str) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    const DAYS: [&str; 7] = [
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "Monday",
        "Tuesday",
        "Wednesday",
    ];
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let weekday = DAYS[days.rem_euclid(7) as usize];
    let month = MONTHS[(m - 1) as usize];
    let mut out = String::new();
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('d') => out.push_str(&format!("{d:02}")),
            Some('m') => out.push_str(&format!("{m:02}")),
            Some('Y') => out.push_str(&y.to_string()),
            Some('y') => out.push_str(&format!("{:02}", y.rem_euclid(100))),
            Some('b') => out.push_str(&month[..3]),
            Some('B') => out.push_str(month),
            Some('a') => out.push_str(&weekday[..3]),
            Some('A') => out.push_str(weekday),
            Some('H') => out.push_str(&format!("{:02}", sod / 3600)),
            Some('M') => out.push_str(&format!("{:02}", sod / 60 % 60)),
            Some('S') => out.push_str(&format!("{:02}", sod % 60)),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

fn strftime_now(fmt: String) -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    strftime(secs, &fmt)
}

/// Writes a JSON string the way Python's `json.dumps(..., ensure_ascii=False)` does.
fn json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

struct JsonStyle {
    indent: Option<String>,
    item_sep: String,
    key_sep: String,
    sort_keys: bool,
}

fn write_json(v: &Value, style: &JsonStyle, depth: usize, out: &mut String) -> Result<(), Error> {
    let newline = |out: &mut String, depth: usize| {
        if let Some(ind) = &style.indent {
            out.push('\n');
            for _ in 0..depth {
                out.push_str(ind);
            }
        }
    };
    match v.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
        ValueKind::Number => {
            if let Some(i) = v.as_i64().filter(|_| v.is_integer()) {
                out.push_str(&i.to_string());
            } else {
                let f = f64::try_from(v.clone()).unwrap_or(f64::NAN);
                if f.is_finite() && f == f.trunc() && f.abs() < 1e16 {
                    out.push_str(&format!("{f:.1}"));
                } else if f.is_nan() {
                    out.push_str("NaN");
                } else if f.is_infinite() {
                    out.push_str(if f > 0.0 { "Infinity" } else { "-Infinity" });
                } else {
                    out.push_str(&f.to_string());
                }
            }
        }
        ValueKind::String => json_string(v.as_str().unwrap_or(""), out),
        ValueKind::Map => {
            let mut keys: Vec<Value> = v.try_iter()?.collect();
            if style.sort_keys {
                keys.sort();
            }
            if keys.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push_str(&style.item_sep);
                }
                newline(out, depth + 1);
                json_string(&k.to_string(), out);
                out.push_str(&style.key_sep);
                write_json(&v.get_item(k)?, style, depth + 1, out)?;
            }
            newline(out, depth);
            out.push('}');
        }
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = v.try_iter()?.collect();
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(&style.item_sep);
                }
                newline(out, depth + 1);
                write_json(item, style, depth + 1, out)?;
            }
            newline(out, depth);
            out.push(']');
        }
        _ => json_string(&v.to_string(), out),
    }
    Ok(())
}

fn tojson(v: Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<Value> = kwargs.get("indent")?;
    let indent = match indent {
        None => None,
        Some(i) if i.is_none() => None,
        Some(i) => match i.as_i64() {
            Some(n) => Some(" ".repeat(usize::try_from(n).unwrap_or(0))),
            None => Some(i.as_str().unwrap_or("").to_string()),
        },
    };
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    let separators: Option<Value> = kwargs.get("separators")?;
    let _: Option<Value> = kwargs.get("ensure_ascii")?;
    kwargs.assert_all_used()?;
    let (mut item_sep, key_sep) = if indent.is_some() {
        (",", ": ")
    } else {
        (", ", ": ")
    };
    let mut key_sep = key_sep.to_string();
    if let Some(seps) = separators {
        let parts: Vec<Value> = seps.try_iter()?.collect();
        if let [a, b] = parts.as_slice() {
            item_sep = a.as_str().unwrap_or(",");
            key_sep = b.as_str().unwrap_or(":").to_string();
            let style = JsonStyle {
                indent,
                item_sep: item_sep.to_string(),
                key_sep,
                sort_keys: sort_keys.unwrap_or(false),
            };
            let mut out = String::new();
            write_json(&v, &style, 0, &mut out)?;
            return Ok(Value::from_safe_string(out));
        }
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "tojson: separators must be a pair",
        ));
    }
    let style = JsonStyle {
        indent,
        item_sep: item_sep.to_string(),
        key_sep,
        sort_keys: sort_keys.unwrap_or(false),
    };
    let mut out = String::new();
    write_json(&v, &style, 0, &mut out)?;
    Ok(Value::from_safe_string(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strftime_matches_known_dates() {
        assert_eq!(
            strftime(0, "%d %b %Y %H:%M:%S %A"),
            "01 Jan 1970 00:00:00 Thursday"
        );
        // 2026-11-30 09:00:00 UTC
        assert_eq!(
            strftime(1_796_029_200, "%d %B %Y %a %H"),
            "30 November 2026 Mon 09"
        );
    }

    #[test]
    fn tokenizer_config_forms() {
        let c = TokenizerConfig::from_json_str(
            r#"{"chat_template": [{"name": "default", "template": "A"}, {"name": "tool_use", "template": "B"}],
                "bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>"}"#,
        )
        .unwrap();
        assert_eq!(c.chat_template.as_deref(), Some("A"));
        assert_eq!(c.named_templates["tool_use"], "B");
        assert_eq!(
            (c.bos_token.as_deref(), c.eos_token.as_deref()),
            (Some("<s>"), Some("</s>"))
        );
        let c = TokenizerConfig::from_json_str(r#"{"chat_template": "T"}"#).unwrap();
        assert_eq!(c.chat_template.as_deref(), Some("T"));
        assert!(
            TokenizerConfig::from_json_str(r#"{"chat_template": 3}"#)
                .unwrap_err()
                .to_string()
                .contains("chat_template")
        );
    }

    #[test]
    fn generation_tags_are_dropped() {
        assert_eq!(
            strip_generation_tags("a{%- generation %}b{% endgeneration -%}c{% if x %}"),
            "abc{% if x %}"
        );
    }
}
