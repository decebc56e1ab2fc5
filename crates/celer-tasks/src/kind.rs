//! Task kinds: Rust functions an app registers under a name, with typed
//! input and output, and the [`Context`] they run with (attempt, progress,
//! cancellation). The built-in `echo` kind lives here too.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use celer::dispatch::Dispatcher;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::Notify;

use crate::model::TaskId;

/// Why an attempt failed, as a kind says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskError {
    message: String,
    retry: bool,
}

impl TaskError {
    /// A failure another attempt may not have: retried with backoff while
    /// attempts remain, then the task is `dead`.
    pub fn retry(message: impl Into<String>) -> TaskError {
        TaskError {
            message: message.into(),
            retry: true,
        }
    }

    /// A failure no retry can mend (bad input): the task is `failed` now.
    pub fn fail(message: impl Into<String>) -> TaskError {
        TaskError {
            message: message.into(),
            retry: false,
        }
    }

    /// The task was asked to stop and stopped: it ends `cancelled`.
    pub fn cancelled() -> TaskError {
        TaskError::fail("cancelled")
    }

    /// Whether another attempt may help.
    pub fn is_retryable(&self) -> bool {
        self.retry
    }

    /// The message stored as the task's `error`.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for TaskError {}

/// What a running kind knows and can do: its task, the attempt, progress
/// reports and the cancellation signal.
#[derive(Clone)]
pub struct Context {
    pub(crate) id: TaskId,
    pub(crate) attempt: u32,
    pub(crate) cancel: Cancel,
    pub(crate) progress: Arc<dyn Fn(f64) + Send + Sync>,
    pub(crate) dispatcher: Dispatcher,
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("id", &self.id)
            .field("attempt", &self.attempt)
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

impl Context {
    /// The task's id.
    pub fn id(&self) -> TaskId {
        self.id
    }

    /// The attempt, 1 for the first. Tasks run at least once and may run
    /// again after a crash: a kind with side effects uses the id and the
    /// attempt to make them idempotent.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Reports progress, 0 to 1 (clamped): stored, shown in `GET
    /// /tasks/{id}` and sent on `/tasks/{id}/events`.
    pub fn progress(&self, fraction: f64) {
        (self.progress)(fraction.clamp(0.0, 1.0));
    }

    /// Whether the task was asked to stop. A kind that sees it returns
    /// [`TaskError::cancelled`]; one that does not is dropped after
    /// [`CANCEL_GRACE`](crate::limits::CANCEL_GRACE).
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_set()
    }

    /// Resolves when the task is asked to stop.
    pub async fn cancelled(&self) {
        self.cancel.wait().await;
    }

    /// The pool for blocking or CPU-heavy work inside an async kind.
    pub fn dispatcher(&self) -> &Dispatcher {
        &self.dispatcher
    }
}

/// A cancellation flag with a wake-up.
#[derive(Clone, Default, Debug)]
pub(crate) struct Cancel(Arc<(AtomicBool, Notify)>);

impl Cancel {
    pub(crate) fn set(&self) {
        self.0.0.store(true, Ordering::SeqCst);
        self.0.1.notify_waiters();
    }

    pub(crate) fn is_set(&self) -> bool {
        self.0.0.load(Ordering::SeqCst)
    }

    pub(crate) async fn wait(&self) {
        loop {
            let notified = self.0.1.notified();
            if self.is_set() {
                return;
            }
            notified.await;
        }
    }
}

pub(crate) type KindFuture = Pin<Box<dyn Future<Output = Result<String, TaskError>> + Send>>;

/// A kind with its types erased: checks an input, runs one.
pub(crate) trait ErasedKind: Send + Sync {
    /// Whether `input` (JSON text) is this kind's input; the reason if not.
    fn check(&self, input: &str) -> Result<(), String>;
    /// Runs on `input` (already checked).
    fn call(&self, input: &str, ctx: Context) -> KindFuture;
}

struct AsyncKind<F, I, O> {
    run: F,
    types: std::marker::PhantomData<fn(I) -> O>,
}

impl<F, Fut, I, O> ErasedKind for AsyncKind<F, I, O>
where
    F: Fn(I, Context) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, TaskError>> + Send + 'static,
    I: DeserializeOwned + Send + 'static,
    O: Serialize + 'static,
{
    fn check(&self, input: &str) -> Result<(), String> {
        serde_json::from_str::<I>(input)
            .map(drop)
            .map_err(|err| err.to_string())
    }

    fn call(&self, input: &str, ctx: Context) -> KindFuture {
        let input = match serde_json::from_str::<I>(input) {
            Ok(input) => input,
            Err(err) => return Box::pin(async move { Err(TaskError::fail(err.to_string())) }),
        };
        let fut = (self.run)(input, ctx);
        Box::pin(async move {
            let output = fut.await?;
            serde_json::to_string(&output)
                .map_err(|err| TaskError::fail(format!("result is not JSON: {err}")))
        })
    }
}

/// The kinds a task API runs, by name. [`Kinds::new`] has `echo`.
#[derive(Clone, Default)]
pub struct Kinds {
    map: HashMap<String, Arc<dyn ErasedKind>>,
}

impl fmt::Debug for Kinds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<&String> = self.map.keys().collect();
        names.sort();
        f.debug_struct("Kinds").field("names", &names).finish()
    }
}

impl Kinds {
    /// The built-in kinds: `echo`.
    pub fn new() -> Kinds {
        let mut kinds = Kinds::default();
        kinds.register("echo", echo);
        kinds
    }

    /// Registers an async kind: its input is deserialized from the
    /// submission's `input` (a mismatch is refused at submit with `422`), its
    /// output serialized as the result.
    ///
    /// # Panics
    ///
    /// When `name` is taken, empty, longer than
    /// [`MAX_KIND_BYTES`](crate::limits::MAX_KIND_BYTES) or not made of
    /// ASCII letters, digits, `-`, `_` and `.`.
    pub fn register<F, Fut, I, O>(&mut self, name: &str, run: F) -> &mut Self
    where
        F: Fn(I, Context) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, TaskError>> + Send + 'static,
        I: DeserializeOwned + Send + 'static,
        O: Serialize + 'static,
    {
        assert!(valid_kind_name(name), "invalid task kind name {name:?}");
        let kind = AsyncKind {
            run,
            types: std::marker::PhantomData,
        };
        let previous = self.map.insert(name.to_owned(), Arc::new(kind));
        assert!(previous.is_none(), "task kind {name:?} registered twice");
        self
    }

    /// Registers a blocking kind, run on the task API's
    /// [`Dispatcher`](celer::dispatch::Dispatcher) threads. Cancellation is
    /// seen through [`Context::is_cancelled`]; a blocking kind cannot be
    /// dropped, so one that ignores it keeps its thread until it returns.
    ///
    /// # Panics
    ///
    /// As [`register`](Self::register).
    pub fn register_blocking<F, I, O>(&mut self, name: &str, run: F) -> &mut Self
    where
        F: Fn(I, &Context) -> Result<O, TaskError> + Send + Sync + 'static,
        I: DeserializeOwned + Send + 'static,
        O: Serialize + Send + 'static,
    {
        let run = Arc::new(run);
        self.register(name, move |input: I, ctx: Context| {
            let run = run.clone();
            async move {
                let pool = ctx.dispatcher.clone();
                let inner = ctx.clone();
                match pool
                    .dispatch_wait(Duration::from_secs(24 * 3600), move || run(input, &inner))
                    .await
                {
                    Ok(result) => result,
                    // A panic (retried like an async kind's) or a stopping pool.
                    Err(err) => Err(TaskError::retry(err.to_string())),
                }
            }
        })
    }

    /// Registers a program as a kind (see [`CommandKind`](crate::CommandKind)):
    /// any JSON input, given on stdin.
    ///
    /// # Panics
    ///
    /// As [`register`](Self::register).
    pub fn register_command(&mut self, name: &str, command: crate::CommandKind) -> &mut Self {
        let command = Arc::new(command);
        self.register(name, move |input: serde_json::Value, ctx: Context| {
            let command = command.clone();
            async move { command.run(input, ctx).await }
        })
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Arc<dyn ErasedKind>> {
        self.map.get(name)
    }

    /// Whether `name` can name a kind: 1 to
    /// [`MAX_KIND_BYTES`](crate::limits::MAX_KIND_BYTES) ASCII letters,
    /// digits, `-`, `_` and `.`, not taken yet.
    pub fn is_free_name(&self, name: &str) -> bool {
        valid_kind_name(name) && !self.map.contains_key(name)
    }

    /// The registered names, sorted.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.map.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }
}

/// Whether `name` may name a kind.
pub(crate) fn valid_kind_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= crate::limits::MAX_KIND_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The `echo` kind's input.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct EchoInput {
    value: serde_json::Value,
    #[serde(default)]
    delay_ms: u64,
}

/// `echo`: gives `value` back after `delay_ms`, reporting progress and
/// stopping early when cancelled.
async fn echo(input: EchoInput, ctx: Context) -> Result<serde_json::Value, TaskError> {
    let delay = Duration::from_millis(input.delay_ms);
    if delay > crate::limits::MAX_ECHO_DELAY {
        return Err(TaskError::fail(format!(
            "delay_ms is over the limit of {}",
            crate::limits::MAX_ECHO_DELAY.as_millis()
        )));
    }
    const STEPS: u32 = 10;
    for step in 0..STEPS {
        tokio::select! {
            () = tokio::time::sleep(delay / STEPS) => {}
            () = ctx.cancelled() => return Err(TaskError::cancelled()),
        }
        if delay >= Duration::from_millis(100) {
            ctx.progress(f64::from(step + 1) / f64::from(STEPS));
        }
    }
    Ok(input.value)
}
