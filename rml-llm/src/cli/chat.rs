//! `rml-llm chat`: a REPL over the model's chat template. Multi-turn reuses the KV
//! cache; Ctrl-C stops the current reply (a second one at the prompt exits); lines
//! come from a line editor on a terminal and from stdin otherwise.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};

use clap::Args;
use rml_llm::chat::{ChatTemplate, RenderOptions};
use rml_llm::sample::Sampler;
use rml_llm::stop::StopReason;
use rml_llm::tokenizer::EncodeOptions;
use rml_llm::{Generation, Session};

use super::input::{Input, Read};
use super::{GenerateArgs, Runner, chat_template, print_stats};

/// Chat with the model's chat template.
#[derive(Args)]
pub struct ChatCommand {
    /// A .gguf file or a Hugging Face directory (default: the bundled model).
    model: Option<PathBuf>,
    #[command(flatten)]
    options: GenerateArgs,
    /// A file to load the line history from and save it to (terminal only).
    #[arg(long)]
    history: Option<PathBuf>,
}

impl ChatCommand {
    /// Runs the REPL until `/exit`, end of input or a second Ctrl-C.
    pub fn run(self) -> Result<(), String> {
        chat(self.model, self.options, self.history)
    }
}

/// Set while a turn runs: Ctrl-C then cancels the reply (even one still being
/// prepared) instead of ending the program.
static GENERATING: AtomicBool = AtomicBool::new(false);
/// Set by Ctrl-C during a reply, or on a terminal after a line is accepted and
/// before its turn starts; cleared before each line is read. The session sees it
/// between prompt chunks (and undoes the turn's prompt), the reply's text callback
/// after that.
static CANCEL: LazyLock<Arc<AtomicBool>> = LazyLock::new(|| Arc::new(AtomicBool::new(false)));

/// Ctrl-C stops the reply being generated. On a terminal (`interactive`) the line
/// editor reads the key itself at the prompt, so a signal outside a turn comes
/// between Enter and the turn's start (or between a reply's end and the next
/// prompt): it cancels the coming reply, where ending the program would lose the
/// conversation to a key pressed a moment early. Over pipes, Ctrl-C outside a
/// reply ends the program as usual.
fn install_interrupt_handler(interactive: bool) -> Result<(), String> {
    ctrlc::set_handler(move || {
        if interactive || GENERATING.load(Ordering::SeqCst) {
            CANCEL.store(true, Ordering::SeqCst);
        } else {
            std::process::exit(130);
        }
    })
    .map_err(|e| format!("installing the Ctrl-C handler: {e}"))
}

/// Runs one turn with Ctrl-C armed to cancel it (a Ctrl-C since the line was
/// read, already in [`CANCEL`], cancels it too).
fn turn_interruptibly(
    state: &mut Chat<'_>,
    line: &str,
    session: &mut Session<'_>,
    sampler: &mut Sampler,
    out: &mut impl Write,
) -> Result<bool, String> {
    GENERATING.store(true, Ordering::SeqCst);
    let result = state.turn(line, session, sampler, out);
    GENERATING.store(false, Ordering::SeqCst);
    result
}

const HELP: &str = "commands: /help, /reset (forget the conversation), /system TEXT (set the \
system message and reset), /stats (the last reply's speeds), /exit (or /quit, Ctrl-D); \
Ctrl-C stops a reply";

/// The chat REPL's state: the conversation and the text already in the session's
/// cache, so each turn only runs what the template adds after it.
struct Chat<'r> {
    runner: &'r Runner,
    template: ChatTemplate,
    options: RenderOptions,
    system: Option<String>,
    messages: Vec<serde_json::Value>,
    /// The rendered text the session's cache (with its pending token) holds.
    fed: String,
    last: Option<Generation>,
}

impl Chat<'_> {
    fn reset(&mut self, session: &mut Session<'_>, sampler: &mut Sampler) {
        self.messages.clear();
        if let Some(system) = &self.system {
            self.messages
                .push(serde_json::json!({"role": "system", "content": system}));
        }
        self.fed.clear();
        session.reset();
        sampler.reset();
    }

    /// One user turn: render, run what is new, stream the reply. `Ok(false)` when
    /// stdout was closed.
    fn turn(
        &mut self,
        line: &str,
        session: &mut Session<'_>,
        sampler: &mut Sampler,
        out: &mut impl Write,
    ) -> Result<bool, String> {
        let tok = &self.runner.tok;
        self.messages
            .push(serde_json::json!({"role": "user", "content": line}));
        let rendered = self
            .template
            .render(
                &serde_json::Value::from(self.messages.clone()),
                &self.options,
            )
            .map_err(|e| e.to_string())?;
        let ids = match rendered.strip_prefix(self.fed.as_str()) {
            Some(new) if !self.fed.is_empty() => tok.encode_with(
                new,
                EncodeOptions {
                    add_special_tokens: false,
                    parse_special: true,
                },
            ),
            _ => {
                session.reset();
                self.fed.clear();
                tok.encode_prompt(&rendered)
            }
        }
        .map_err(|e| e.to_string())?;
        let mut reply = Vec::new();
        let generation = {
            let mut tee = Tee {
                out: &mut *out,
                copy: &mut reply,
            };
            self.runner
                .stream(session, sampler, &ids, &mut tee, Some(&**CANCEL))
        };
        let generation = match generation {
            Ok(Some(g)) => g,
            Ok(None) => return Ok(false),
            Err(e) => {
                self.messages.pop();
                session.reset();
                self.fed.clear();
                return Err(e);
            }
        };
        if generation.reason == StopReason::Cancelled && generation.tokens.is_empty() {
            // Cancelled while the prompt ran: the session undid it, so the turn is
            // dropped and the conversation is as before it.
            self.messages.pop();
            self.last = Some(generation);
            return Ok(writeln!(out).and_then(|()| out.flush()).is_ok());
        }
        let reply = String::from_utf8_lossy(&reply).into_owned();
        match generation.reason {
            StopReason::Token(t) => self.fed = rendered + &reply + &tok.decode(&[t], false),
            // The cache holds tokens whose text was not shown (a stop string, text held
            // back when Ctrl-C came): the next turn runs the conversation from scratch.
            StopReason::String(_) | StopReason::Cancelled => {
                session.reset();
                self.fed.clear();
            }
            _ => self.fed = rendered + &reply,
        }
        self.messages
            .push(serde_json::json!({"role": "assistant", "content": reply}));
        self.last = Some(generation);
        Ok(writeln!(out).and_then(|()| out.flush()).is_ok())
    }
}

/// Writes to `out` and keeps a copy.
struct Tee<'a, W: Write> {
    out: &'a mut W,
    copy: &'a mut Vec<u8>,
}

impl<W: Write> Write for Tee<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.copy.extend_from_slice(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

fn chat(
    model: Option<PathBuf>,
    args: GenerateArgs,
    history: Option<PathBuf>,
) -> Result<(), String> {
    let runner = Runner::new(model, args)?;
    let source = chat_template(&runner.path)?
        .ok_or_else(|| format!("{}: the model has no chat template", runner.path.display()))?;
    let template = ChatTemplate::new(&source).map_err(|e| e.to_string())?;
    let token_text = |id: Option<u32>| {
        id.and_then(|i| runner.tok.id_to_token(i))
            .unwrap_or("")
            .to_string()
    };
    let options = RenderOptions {
        add_generation_prompt: true,
        bos_token: token_text(runner.tok.bos_id()),
        eos_token: token_text(runner.tok.eos_id()),
        ..RenderOptions::default()
    };
    let (mut session, mut sampler) = runner.session()?;
    session.set_cancel(Some(Arc::clone(&CANCEL)));
    let mut state = Chat {
        runner: &runner,
        template,
        options,
        system: None,
        messages: Vec::new(),
        fed: String::new(),
        last: None,
    };
    let mut input = Input::open(history)?;
    let interactive = input.is_terminal();
    install_interrupt_handler(interactive)?;
    if interactive {
        eprintln!("{HELP}");
    }
    let mut stdout = std::io::stdout().lock();
    let mut interrupted = false;
    loop {
        CANCEL.store(false, Ordering::SeqCst);
        let line = match input.read()? {
            Read::Eof => break,
            Read::Interrupted if interrupted => break,
            Read::Interrupted => {
                interrupted = true;
                eprintln!("(Ctrl-C again or /exit to quit)");
                continue;
            }
            Read::Refused(why) => {
                eprintln!("rml-llm: {why}");
                continue;
            }
            Read::Line(line) => line,
        };
        interrupted = false;
        match line.split_once(' ').unwrap_or((&line, "")) {
            ("/exit" | "/quit", _) => break,
            ("/help", _) => eprintln!("{HELP}"),
            ("/reset", _) => state.reset(&mut session, &mut sampler),
            ("/system", text) => {
                state.system = Some(text.to_string()).filter(|t| !t.is_empty());
                state.reset(&mut session, &mut sampler);
            }
            ("/stats", _) => match &state.last {
                Some(g) => print_stats(g),
                None => eprintln!("no reply yet"),
            },
            (command, _) if command.starts_with('/') && !command[1..].contains('/') => {
                eprintln!("unknown command {command}; /help lists them");
            }
            _ if line.trim().is_empty() => {}
            _ => {
                match turn_interruptibly(&mut state, &line, &mut session, &mut sampler, &mut stdout)
                {
                    Ok(true) => {
                        if let (true, Some(g)) = (interactive, &state.last) {
                            let s = g.stats;
                            let cut = if g.reason == StopReason::Cancelled {
                                ", stopped"
                            } else {
                                ""
                            };
                            eprintln!(
                                "[{} tokens, {:.1} tok/s{cut}]",
                                s.generated_tokens,
                                s.decode_tokens_per_second()
                            );
                        }
                    }
                    Ok(false) => break,
                    Err(e) => eprintln!("rml-llm: error: {e}"),
                }
            }
        }
    }
    input.save()
}
