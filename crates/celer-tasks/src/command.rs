//! Command kinds: a program the operator names with a fixed argv, run with
//! the task's input as JSON on stdin and its stdout as the result; never a
//! shell, never a command a client names.
//!
//! The environment is cleared; stdout is capped (over the cap the program
//! is killed and the task fails); the task's timeout kills it (retried as
//! any timeout); cancelling kills it; a non-zero exit fails the task with
//! the tail of its stderr.

use std::process::Stdio;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::kind::{Context, TaskError};

/// Default cap of a command's stdout, in bytes: the result limit
/// ([`MAX_RESULT_BYTES`](crate::limits::MAX_RESULT_BYTES)).
pub const DEFAULT_MAX_OUTPUT: usize = crate::limits::MAX_RESULT_BYTES;

/// Bytes of stderr kept for the error of a failed command: the last 4 KiB.
pub const STDERR_TAIL_BYTES: usize = 4096;

/// A program run as a task kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandKind {
    argv: Vec<String>,
    max_output: usize,
}

impl CommandKind {
    /// Runs `argv[0]` (a path, or a name looked up in the server's `PATH`
    /// at start) with the arguments `argv[1..]`. `None` when `argv` is empty.
    pub fn new(argv: Vec<String>) -> Option<CommandKind> {
        if argv.is_empty() || argv[0].is_empty() {
            return None;
        }
        Some(CommandKind {
            argv,
            max_output: DEFAULT_MAX_OUTPUT,
        })
    }

    /// The cap of stdout, in bytes. Default is [`DEFAULT_MAX_OUTPUT`].
    pub fn max_output(mut self, bytes: usize) -> Self {
        self.max_output = bytes;
        self
    }

    /// The program and its arguments.
    pub fn argv(&self) -> &[String] {
        &self.argv
    }

    /// Runs the program once for a task.
    pub(crate) async fn run(
        &self,
        input: serde_json::Value,
        ctx: Context,
    ) -> Result<serde_json::Value, TaskError> {
        let mut child = tokio::process::Command::new(&self.argv[0])
            .args(&self.argv[1..])
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // The runner drops this future at the task's timeout or after
            // the cancel grace: the program dies with it.
            .kill_on_drop(true)
            .spawn()
            .map_err(|err| TaskError::retry(format!("cannot start {}: {err}", self.argv[0])))?;
        let mut stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let input = serde_json::to_vec(&input).unwrap_or_default();
        // A program that does not read its input closes the pipe: not an
        // error of the task. Both helpers end when the program's pipes do.
        tokio::spawn(async move {
            let _ = stdin.write_all(&input).await;
        });
        let err_tail = tokio::spawn(tail(stderr));
        let max = self.max_output;
        let out = tokio::select! {
            out = read_capped(stdout, max) => out,
            () = ctx.cancelled() => {
                let _ = child.kill().await;
                return Err(TaskError::cancelled());
            }
        };
        let Some(out) = out else {
            let _ = child.kill().await;
            return Err(TaskError::fail(format!(
                "output over the limit of {max} bytes"
            )));
        };
        let status = tokio::select! {
            status = child.wait() => status.map_err(|err| TaskError::retry(err.to_string()))?,
            () = ctx.cancelled() => {
                let _ = child.kill().await;
                return Err(TaskError::cancelled());
            }
        };
        if !status.success() {
            let err_tail = err_tail.await.unwrap_or_default();
            let tail = String::from_utf8_lossy(&err_tail);
            return Err(TaskError::fail(format!(
                "{status}; stderr: {}",
                tail.trim_end()
            )));
        }
        // JSON on stdout is the result; any other text becomes a string.
        Ok(serde_json::from_slice(&out).unwrap_or_else(|_| {
            serde_json::Value::String(String::from_utf8_lossy(&out).into_owned())
        }))
    }
}

/// Reads all of `reader`, or `None` past `max` bytes.
async fn read_capped(reader: impl AsyncRead + Unpin, max: usize) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    let mut taken = reader.take(limit);
    taken.read_to_end(&mut out).await.ok()?;
    (out.len() <= max).then_some(out)
}

/// Reads all of `reader`, keeping the last [`STDERR_TAIL_BYTES`].
async fn tail(mut reader: impl AsyncRead + Unpin) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                kept.extend_from_slice(&buf[..n]);
                if kept.len() > STDERR_TAIL_BYTES {
                    kept.drain(..kept.len() - STDERR_TAIL_BYTES);
                }
            }
        }
    }
}
