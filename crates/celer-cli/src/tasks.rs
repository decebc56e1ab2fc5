//! `celer tasks`: the task store's administration from the command line:
//! `celer tasks keys create|list|revoke` for the task API's API keys.
//!
//! These open the store's database directly (SQLite allows it beside a
//! running `celer serve --tasks`, whose next request sees the change).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use celer_tasks::keys::{self, ApiKey, NewKey, Quotas};
use celer_tasks::model::{now_millis, rfc3339};
use celer_tasks::{Durability, SqliteStore, Store};

use crate::Usage;

/// `celer tasks` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct TasksArgs {
    #[command(subcommand)]
    command: TasksCommand,
}

#[derive(Debug, clap::Subcommand)]
enum TasksCommand {
    /// API keys of the task API (`celer serve --tasks --tasks-require-key`).
    Keys(KeysArgs),
}

#[derive(Debug, clap::Args)]
struct KeysArgs {
    #[command(subcommand)]
    command: KeysCommand,
}

/// Where the task store is.
#[derive(Debug, clap::Args)]
struct StoreDir {
    /// Directory of the task store (as `celer serve --data-dir`).
    #[arg(long, value_name = "DIR", default_value = "celer-data")]
    data_dir: PathBuf,
}

#[derive(Debug, clap::Subcommand)]
enum KeysCommand {
    /// Create a key and print its token (on stdout, once: only its hash is
    /// kept).
    Create {
        #[command(flatten)]
        store: StoreDir,
        /// A name for people: who holds the key, what for.
        #[arg(long, value_name = "NAME", default_value = "")]
        name: String,
        /// Tasks of this key queued or running at once [default: no limit].
        #[arg(long, value_name = "N")]
        max_concurrent: Option<u64>,
        /// Tasks this key may submit per hour (sliding) [default: no limit].
        #[arg(long, value_name = "N")]
        per_hour: Option<u64>,
        /// Bytes of input (JSON) this key may submit per hour (sliding)
        /// [default: no limit].
        #[arg(long, value_name = "BYTES")]
        input_bytes_per_hour: Option<u64>,
        /// Bytes of input (JSON) of one task [default: no limit below the
        /// API's own 1 MiB body limit].
        #[arg(long, value_name = "BYTES")]
        max_input_bytes: Option<u64>,
        /// Print the key and its token as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// List the keys (never their tokens).
    List {
        #[command(flatten)]
        store: StoreDir,
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a key: its requests are refused (403) from now on.
    Revoke {
        #[command(flatten)]
        store: StoreDir,
        /// The key's id (from `keys list`).
        id: i64,
    },
}

/// Runs `celer tasks ...`.
pub(crate) fn run(args: TasksArgs) -> anyhow::Result<ExitCode> {
    let TasksCommand::Keys(keys) = args.command;
    match keys.command {
        KeysCommand::Create {
            store,
            name,
            max_concurrent,
            per_hour,
            input_bytes_per_hour,
            max_input_bytes,
            json,
        } => {
            let db = open(&store)?;
            let new = NewKey {
                name,
                quotas: Quotas {
                    max_concurrent,
                    per_hour,
                    input_bytes_per_hour,
                    max_input_bytes,
                },
            };
            if new.name.len() > keys::MAX_KEY_NAME_BYTES || new.name.chars().any(char::is_control) {
                return Err(Usage(format!(
                    "--name must be at most {} bytes, without control characters",
                    keys::MAX_KEY_NAME_BYTES
                ))
                .into());
            }
            let (key, token) =
                keys::create_key(&db, &new, now_millis()).context("cannot create the key")?;
            if json {
                let mut value = key_json(&key);
                value["token"] = serde_json::Value::String(token);
                println!("{value}");
            } else {
                eprintln!(
                    "celer: created API key {} ({}); its token, shown once:",
                    key.id,
                    describe(&key)
                );
                println!("{token}");
            }
        }
        KeysCommand::List { store, json } => {
            let db = open_existing(&store)?;
            let all = db.keys().context("cannot read the keys")?;
            if json {
                let list: Vec<serde_json::Value> = all.iter().map(key_json).collect();
                println!("{}", serde_json::Value::Array(list));
            } else if all.is_empty() {
                eprintln!("celer: no API keys in {}", store.data_dir.display());
            } else {
                println!(
                    "{:>4}  {:<12}  {:<20}  {:<24}  {:<24}  QUOTAS",
                    "ID", "HINT", "NAME", "CREATED", "REVOKED"
                );
                for key in &all {
                    println!(
                        "{:>4}  {:<12}  {:<20}  {:<24}  {:<24}  {}",
                        key.id,
                        format!("{}…", key.hint),
                        key.name,
                        rfc3339(key.created_at),
                        key.revoked_at
                            .map(rfc3339)
                            .unwrap_or_else(|| "-".to_owned()),
                        quotas(&key.quotas),
                    );
                }
            }
        }
        KeysCommand::Revoke { store, id } => {
            let db = open_existing(&store)?;
            match db
                .revoke_key(id, now_millis())
                .context("cannot revoke the key")?
            {
                Some(key) => eprintln!(
                    "celer: API key {} revoked ({})",
                    key.id,
                    key.revoked_at.map(rfc3339).unwrap_or_default()
                ),
                None => return Err(Usage(format!("no API key {id}")).into()),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Opens an existing store: reading or revoking keys in a directory that
/// has none is a mistake (a mistyped `--data-dir`), not a new store.
fn open_existing(store: &StoreDir) -> anyhow::Result<SqliteStore> {
    if !store.data_dir.join(celer_tasks::store::DB_FILE).is_file() {
        return Err(Usage(format!(
            "no task store in {} (--data-dir)",
            store.data_dir.display()
        ))
        .into());
    }
    open(store)
}

fn open(store: &StoreDir) -> anyhow::Result<SqliteStore> {
    SqliteStore::open(&store.data_dir, Durability::Process)
        .with_context(|| format!("cannot open the task store in {}", store.data_dir.display()))
}

fn key_json(key: &ApiKey) -> serde_json::Value {
    serde_json::json!({
        "id": key.id,
        "name": key.name,
        "hint": key.hint,
        "quotas": key.quotas,
        "created_at": rfc3339(key.created_at),
        "revoked_at": key.revoked_at.map(rfc3339),
    })
}

fn describe(key: &ApiKey) -> String {
    let name = if key.name.is_empty() {
        "no name".to_owned()
    } else {
        format!("{:?}", key.name)
    };
    format!("{name}; quotas: {}", quotas(&key.quotas))
}

/// The quotas as `name=limit` words, or `none`.
fn quotas(q: &Quotas) -> String {
    let words: Vec<String> = [
        ("max-concurrent", q.max_concurrent),
        ("per-hour", q.per_hour),
        ("input-bytes-per-hour", q.input_bytes_per_hour),
        ("max-input-bytes", q.max_input_bytes),
    ]
    .into_iter()
    .filter_map(|(name, limit)| limit.map(|n| format!("{name}={n}")))
    .collect();
    if words.is_empty() {
        "none".to_owned()
    } else {
        words.join(" ")
    }
}
