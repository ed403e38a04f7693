//! The replay loop: read a scenario line by line, apply each command to a fresh engine with the
//! line number as its sequence number, and write every event and result as it comes.

use std::io::{self, BufRead, Write};

use rialto_core::{Command, Engine, Event, EventSink};

use crate::scenario::{self, LineError, LineProblem, SymbolNames};

/// Longest scenario line accepted, in bytes. A longer line is malformed and is skipped without
/// being held in memory.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayOptions {
    /// End the output with the `final` state line.
    pub final_state: bool,
    /// Stop at the first malformed line instead of reporting it and going on.
    pub strict: bool,
    /// The engine's capacities and limits (a venue's `[engine]`); `None`: `rialto serve`'s
    /// defaults.
    pub engine: Option<rialto_core::EngineConfig>,
}

/// Counts of what a replay read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplaySummary {
    /// Lines read, blank and malformed ones included.
    pub lines: u64,
    /// Commands applied (whatever their result).
    pub commands: u64,
    /// Malformed lines reported and skipped.
    pub malformed: u64,
}

#[derive(Debug)]
pub enum ReplayError {
    /// `--strict`: the replay stopped at this malformed line (already reported on `diag`).
    Stopped(LineError),
    Io(io::Error),
}

impl std::fmt::Display for ReplayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplayError::Stopped(e) => write!(f, "stopped at the first malformed line ({e})"),
            ReplayError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ReplayError {}

impl From<io::Error> for ReplayError {
    fn from(e: io::Error) -> Self {
        ReplayError::Io(e)
    }
}

/// Writes each event as a JSON line as the engine produces it.
struct LineSink<'a, W: Write> {
    out: &'a mut W,
    seq: u64,
    names: &'a SymbolNames,
    buf: Vec<u8>,
    /// The first write error; `on_event` cannot return it.
    error: Option<io::Error>,
}

impl<W: Write> LineSink<'_, W> {
    fn emit(&mut self) {
        if self.error.is_none() {
            self.error = self.out.write_all(&self.buf).err();
        }
        self.buf.clear();
    }
}

impl<W: Write> EventSink for LineSink<'_, W> {
    fn on_event(&mut self, event: &Event<'_>) {
        scenario::write_event(&mut self.buf, self.seq, self.names, event);
        self.emit();
    }
}

/// Replays the scenario read from `input` on a fresh engine, writing events to `out` and one
/// `line N: <what>` report per malformed line to `diag`. `out` is flushed before returning,
/// whatever the outcome.
pub fn replay(
    input: &mut impl BufRead,
    out: &mut impl Write,
    diag: &mut impl Write,
    options: ReplayOptions,
) -> Result<ReplaySummary, ReplayError> {
    let result = replay_inner(input, out, diag, options);
    let flushed = out.flush();
    let summary = result?;
    flushed?;
    Ok(summary)
}

fn replay_inner(
    input: &mut impl BufRead,
    out: &mut impl Write,
    diag: &mut impl Write,
    options: ReplayOptions,
) -> Result<ReplaySummary, ReplayError> {
    let config = options
        .engine
        .unwrap_or_else(rialto_server::config::default_engine_config);
    let mut engine = Engine::new(config);
    let mut names = SymbolNames::default();
    let mut summary = ReplaySummary::default();
    let mut line = Vec::with_capacity(256);
    let mut buf = Vec::with_capacity(256);
    while let Some(fits) = read_line_bounded(input, &mut line, MAX_LINE_BYTES)? {
        summary.lines += 1;
        let seq = summary.lines;
        let parsed = if fits {
            scenario::parse_line(&engine, &line)
        } else {
            Err(LineProblem::TooLong {
                max_bytes: MAX_LINE_BYTES,
            })
        };
        let line = match parsed {
            Ok(Some(line)) => line,
            Ok(None) => continue,
            Err(problem) => {
                let error = LineError { line: seq, problem };
                writeln!(diag, "{error}")?;
                summary.malformed += 1;
                if options.strict {
                    return Err(ReplayError::Stopped(error));
                }
                continue;
            }
        };
        let mut sink = LineSink {
            out,
            seq,
            names: &names,
            buf: std::mem::take(&mut buf),
            error: None,
        };
        let cmd = &line.command;
        let result = engine.apply(seq, line.timestamp(), cmd, &mut sink);
        buf = sink.buf;
        if let Some(e) = sink.error {
            return Err(e.into());
        }
        summary.commands += 1;
        if let (Command::AddSymbol(spec), Ok(())) = (cmd, result) {
            names.insert(engine.symbol_id(spec.symbol.as_str()), spec.symbol);
        }
        scenario::write_result(&mut buf, seq, result);
        out.write_all(&buf)?;
        buf.clear();
    }
    if options.final_state {
        scenario::write_final(&mut buf, &engine);
        out.write_all(&buf)?;
    }
    Ok(summary)
}

/// Reads one line into `line`, without its `\n`. Returns `None` at the end of input, otherwise
/// whether the line fit in `max_bytes` (a longer line is consumed but not kept).
pub fn read_line_bounded(
    input: &mut impl BufRead,
    line: &mut Vec<u8>,
    max_bytes: usize,
) -> io::Result<Option<bool>> {
    line.clear();
    let mut fits = true;
    let mut read_any = false;
    loop {
        let available = match input.fill_buf() {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(read_any.then_some(fits));
        }
        read_any = true;
        let (chunk, used, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (&available[..i], i + 1, true),
            None => (available, available.len(), false),
        };
        if fits {
            if line.len() + chunk.len() > max_bytes {
                fits = false;
                line.clear();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        input.consume(used);
        if done {
            return Ok(Some(fits));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_bounded() {
        let mut input: &[u8] = b"abc\n\nxxxxxxxx\nlast";
        let mut line = Vec::new();
        assert_eq!(
            read_line_bounded(&mut input, &mut line, 5).unwrap(),
            Some(true)
        );
        assert_eq!(line, b"abc");
        assert_eq!(
            read_line_bounded(&mut input, &mut line, 5).unwrap(),
            Some(true)
        );
        assert_eq!(line, b"");
        assert_eq!(
            read_line_bounded(&mut input, &mut line, 5).unwrap(),
            Some(false)
        );
        assert_eq!(
            read_line_bounded(&mut input, &mut line, 5).unwrap(),
            Some(true)
        );
        assert_eq!(line, b"last");
        assert_eq!(read_line_bounded(&mut input, &mut line, 5).unwrap(), None);
    }
}
