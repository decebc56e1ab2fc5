//! The SQLite store: leases, attempts, fencing, retries, idempotency,
//! cancel, retention; with explicit clocks, no sleeping.

use std::time::Duration;

use celer_tasks::model::{ListFilter, NewTask, Outcome, State, Submitted};
use celer_tasks::store::{Claim, Durability, Finish, SqliteStore, Store, Submit};

const LEASE: Duration = Duration::from_secs(30);
const TTL: Duration = Duration::from_secs(3600);
const MAX_QUEUED: u64 = 1000;

fn new_task(input: &str, max_attempts: u32) -> NewTask {
    NewTask {
        kind: "echo".to_owned(),
        input: input.to_owned(),
        priority: 0,
        run_at: 0,
        timeout_ms: 1000,
        max_attempts,
        key_id: None,
    }
}

fn open(dir: &tempfile::TempDir) -> SqliteStore {
    SqliteStore::open(dir.path(), Durability::Process).unwrap()
}

fn created(submitted: Submitted) -> celer_tasks::Task {
    match submitted {
        Submitted::Created(task) => task,
        other => panic!("expected a new task, got {other:?}"),
    }
}

#[test]
fn a_task_survives_reopening_and_a_dead_lease_runs_it_again_with_attempts_counted() {
    let dir = tempfile::tempdir().unwrap();
    let id = {
        let store = open(&dir);
        let task = created(
            store
                .submit(&new_task("1", 3), None, TTL, MAX_QUEUED, 1_000)
                .unwrap(),
        );
        let claimed = store.claim("a", 10, LEASE, 2_000).unwrap();
        assert_eq!(claimed.len(), 1);
        assert_eq!((claimed[0].state, claimed[0].attempts), (State::Running, 1));
        task.id
        // The store is dropped holding the lease: the process died.
    };
    let store = open(&dir);
    assert_eq!(store.queued().unwrap(), 0, "counted again at open: it runs");
    // Within the lease nobody takes it.
    assert!(store.claim("b", 10, LEASE, 20_000).unwrap().is_empty());
    // After it, the next claim runs it again as attempt 2.
    let again = store.claim("b", 10, LEASE, 40_000).unwrap();
    assert_eq!((again[0].id, again[0].attempts), (id, 2));
    // The first owner's late outcome is stale and changes nothing.
    let stale = Claim { id, attempt: 1 };
    let late = store
        .finish(
            &stale,
            &Outcome::Succeeded("\"late\"".into()),
            Duration::ZERO,
            41_000,
        )
        .unwrap();
    assert_eq!(late, None);
    let current = Claim { id, attempt: 2 };
    let done = store
        .finish(
            &current,
            &Outcome::Succeeded("\"ok\"".into()),
            Duration::ZERO,
            42_000,
        )
        .unwrap()
        .unwrap();
    assert_eq!((done.state, done.attempts), (State::Succeeded, 2));
    assert_eq!(store.result(id).unwrap().as_deref(), Some("\"ok\""));
}

#[test]
fn a_lost_lease_on_the_last_attempt_makes_the_task_dead() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let task = created(
        store
            .submit(&new_task("1", 1), None, TTL, MAX_QUEUED, 0)
            .unwrap(),
    );
    store.claim("a", 1, LEASE, 0).unwrap();
    assert!(store.claim("b", 1, LEASE, 31_000).unwrap().is_empty());
    let dead = store.get(task.id).unwrap().unwrap();
    assert_eq!((dead.state, dead.attempts), (State::Dead, 1));
    assert!(dead.error.unwrap().contains("lease"));
}

#[test]
fn retryable_failures_back_off_then_the_task_is_dead() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let task = created(
        store
            .submit(&new_task("1", 2), None, TTL, MAX_QUEUED, 0)
            .unwrap(),
    );
    let failure = Outcome::Failed {
        error: "flaky".into(),
        retry: true,
    };
    assert_eq!(store.queued().unwrap(), 1);
    store.claim("a", 1, LEASE, 0).unwrap();
    assert_eq!(store.queued().unwrap(), 0);
    let retried = store
        .finish(
            &Claim {
                id: task.id,
                attempt: 1,
            },
            &failure,
            Duration::from_secs(10),
            100,
        )
        .unwrap()
        .unwrap();
    assert_eq!((retried.state, retried.run_at), (State::Queued, 10_100));
    assert_eq!(store.queued().unwrap(), 1);
    // Not due before its backoff.
    assert!(store.claim("a", 1, LEASE, 5_000).unwrap().is_empty());
    assert_eq!(store.claim("a", 1, LEASE, 10_100).unwrap().len(), 1);
    let dead = store
        .finish(
            &Claim {
                id: task.id,
                attempt: 2,
            },
            &failure,
            Duration::ZERO,
            11_000,
        )
        .unwrap()
        .unwrap();
    assert_eq!((dead.state, dead.attempts), (State::Dead, 2));
    assert_eq!(dead.error.as_deref(), Some("flaky"));
}

#[test]
fn a_permanent_failure_is_failed_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let task = created(
        store
            .submit(&new_task("1", 5), None, TTL, MAX_QUEUED, 0)
            .unwrap(),
    );
    store.claim("a", 1, LEASE, 0).unwrap();
    let failed = Outcome::Failed {
        error: "bad input".into(),
        retry: false,
    };
    let done = store
        .finish(
            &Claim {
                id: task.id,
                attempt: 1,
            },
            &failed,
            Duration::ZERO,
            1,
        )
        .unwrap()
        .unwrap();
    assert_eq!((done.state, done.attempts), (State::Failed, 1));
}

#[test]
fn an_idempotency_key_gives_the_same_task_or_a_conflict_until_it_expires() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let first = created(
        store
            .submit(
                &new_task(r#"{"a":1,"b":2}"#, 3),
                Some("k"),
                TTL,
                MAX_QUEUED,
                0,
            )
            .unwrap(),
    );
    // The same JSON, spelled otherwise, is the same submission.
    match store
        .submit(
            &new_task(r#"{"b":2, "a":1}"#, 3),
            Some("k"),
            TTL,
            MAX_QUEUED,
            10,
        )
        .unwrap()
    {
        Submitted::Existing(task) => assert_eq!(task.id, first.id),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        store
            .submit(&new_task("2", 3), Some("k"), TTL, MAX_QUEUED, 20)
            .unwrap(),
        Submitted::KeyConflict
    );
    // After the key's time it makes a new task; the purge forgets it.
    let later = 3_600_001;
    let second = created(
        store
            .submit(&new_task("2", 3), Some("k"), TTL, MAX_QUEUED, later)
            .unwrap(),
    );
    assert_ne!(second.id, first.id);
}

#[test]
fn the_queue_bound_refuses_submits() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    for _ in 0..3 {
        created(store.submit(&new_task("1", 1), None, TTL, 3, 0).unwrap());
    }
    assert_eq!(
        store.submit(&new_task("1", 1), None, TTL, 3, 0).unwrap(),
        Submitted::QueueFull
    );
    assert_eq!(store.queued().unwrap(), 3);
    drop(store);
    assert_eq!(open(&dir).queued().unwrap(), 3, "counted again at open");
}

#[test]
fn cancel_ends_a_queued_task_and_marks_a_running_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let queued = created(
        store
            .submit(&new_task("1", 1), None, TTL, MAX_QUEUED, 0)
            .unwrap(),
    );
    let cancelled = store.cancel(queued.id, 5).unwrap().unwrap();
    assert_eq!(cancelled.state, State::Cancelled);
    assert_eq!(store.queued().unwrap(), 0);
    assert!(
        store.claim("a", 10, LEASE, 10).unwrap().is_empty(),
        "a cancelled task never runs"
    );

    let running = created(
        store
            .submit(&new_task("2", 1), None, TTL, MAX_QUEUED, 0)
            .unwrap(),
    );
    store.claim("a", 10, LEASE, 20).unwrap();
    let marked = store.cancel(running.id, 30).unwrap().unwrap();
    assert_eq!(
        (marked.state, marked.cancel_requested),
        (State::Running, true)
    );
    let claim = Claim {
        id: running.id,
        attempt: 1,
    };
    assert_eq!(
        store
            .renew("a", std::slice::from_ref(&claim), 40_000)
            .unwrap(),
        vec![claim.clone()]
    );
    let done = store
        .finish(&claim, &Outcome::Cancelled, Duration::ZERO, 50)
        .unwrap()
        .unwrap();
    assert_eq!(done.state, State::Cancelled);
    assert_eq!(store.cancel(999, 60).unwrap(), None);
}

#[test]
fn claims_follow_priority_then_run_at_and_list_pages_newest_first() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let mut ids = Vec::new();
    for (priority, run_at) in [(0, 0), (5, 100), (5, 50), (0, 10_000)] {
        let mut task = new_task("1", 1);
        task.priority = priority;
        task.run_at = run_at;
        ids.push(created(store.submit(&task, None, TTL, MAX_QUEUED, 0).unwrap()).id);
    }
    let order: Vec<i64> = store
        .claim("a", 10, LEASE, 1_000)
        .unwrap()
        .iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(order, vec![ids[2], ids[1], ids[0]]);

    let page = |before| {
        store
            .list(&ListFilter {
                before,
                limit: 3,
                ..ListFilter::default()
            })
            .unwrap()
            .iter()
            .map(|t| t.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(page(None), vec![ids[3], ids[2], ids[1]]);
    assert_eq!(page(Some(ids[1])), vec![ids[0]]);
    let queued = store
        .list(&ListFilter {
            states: vec![State::Queued],
            limit: 10,
            ..ListFilter::default()
        })
        .unwrap();
    assert_eq!(queued.len(), 1);
    let stats = store.stats(100).unwrap();
    assert_eq!(stats.by_state["running"], 3);
    assert_eq!(stats.by_kind["echo"]["queued"], 1);
}

#[test]
fn claims_skip_tasks_due_later_across_many_priority_levels() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let now = 1_000;
    // 40 levels (more than a claim visits one by one before it reads the
    // rest in one pass), each with a task due later, then one due now,
    // then another due later; every fourth level has nothing due.
    let mut due = Vec::new();
    for level in 0..40 {
        let priority = 100 - 5 * level;
        let submit = |run_at| {
            let mut task = new_task("1", 1);
            task.priority = priority;
            task.run_at = run_at;
            created(store.submit(&task, None, TTL, MAX_QUEUED, 0).unwrap()).id
        };
        submit(now + 1);
        if level % 4 != 3 {
            let early = submit(now - 1 - i64::from(level));
            due.push((priority, early));
        }
        submit(now + 500);
    }
    // Highest priority first; within a level, the earliest run_at.
    let expected: Vec<i64> = due.iter().map(|(_, id)| *id).collect();
    let mut claimed = Vec::new();
    // Claims of every size: some end inside the levels read one by one,
    // some inside the single pass after them.
    for max in [1, 2, 7, 3, 100] {
        let got = store.claim("a", max, LEASE, now).unwrap();
        assert!(got.len() <= max);
        assert!(got.iter().all(|t| t.run_at <= now));
        claimed.extend(got.iter().map(|t| t.id));
    }
    assert_eq!(claimed, expected);
    assert!(store.claim("a", 10, LEASE, now).unwrap().is_empty());
    assert_eq!(store.queued().unwrap(), 80);
    // Later, the rest is due, in the same order of levels.
    let rest = store.claim("a", 1000, LEASE, now + 500).unwrap();
    assert_eq!(rest.len(), 80);
    let priorities: Vec<i32> = rest.iter().map(|t| t.priority).collect();
    let mut sorted = priorities.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(priorities, sorted);
    assert_eq!(store.queued().unwrap(), 0);
}

#[test]
fn purge_deletes_finished_tasks_past_retention_only() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let old = created(
        store
            .submit(&new_task("1", 1), None, TTL, MAX_QUEUED, 0)
            .unwrap(),
    );
    let waiting = created(
        store
            .submit(&new_task("2", 1), None, TTL, MAX_QUEUED, 0)
            .unwrap(),
    );
    store.cancel(old.id, 100).unwrap();
    assert_eq!(store.purge(50, 100).unwrap(), 0);
    assert_eq!(store.purge(101, 101).unwrap(), 1);
    assert_eq!(store.get(old.id).unwrap(), None);
    assert!(store.get(waiting.id).unwrap().is_some());
}

/// Submits that arrive together share one commit: each answered as if
/// alone, in order (a key used twice in the group gives the first task;
/// the queue bound counts the group's own tasks), all durable on return.
#[test]
fn a_group_of_submits_is_answered_in_order_and_survives_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let submit = |input: &str, key: Option<&str>| Submit {
        task: new_task(input, 3),
        idempotency_key: key.map(str::to_owned),
    };
    let ids = {
        let store = open(&dir);
        let group = [
            submit("1", Some("k")),
            submit("2", None),
            submit("1", Some("k")),
            submit("3", Some("k")),
            submit("4", None),
        ];
        let answers = store.submit_many(&group, TTL, 3, 1_000).unwrap();
        let answers: Vec<Submitted> = answers.into_iter().map(Result::unwrap).collect();
        let first = match &answers[0] {
            Submitted::Created(task) => task.clone(),
            other => panic!("expected a new task, got {other:?}"),
        };
        assert!(matches!(&answers[1], Submitted::Created(t) if t.input == "2"));
        assert!(matches!(&answers[2], Submitted::Existing(t) if t.id == first.id));
        assert!(matches!(answers[3], Submitted::KeyConflict));
        assert!(
            matches!(&answers[4], Submitted::Created(t) if t.input == "4"),
            "two queued of 3: room for one more"
        );
        assert_eq!(store.queued().unwrap(), 3);
        let full = store
            .submit_many(&[submit("5", None)], TTL, 3, 1_000)
            .unwrap();
        assert!(matches!(full[0], Ok(Submitted::QueueFull)));
        store
            .list(&ListFilter {
                limit: 10,
                ..ListFilter::default()
            })
            .unwrap()
            .iter()
            .map(|t| t.id)
            .collect::<Vec<_>>()
        // Dropped: the process ends; the group's commit must hold.
    };
    let store = open(&dir);
    assert_eq!(ids.len(), 3);
    assert_eq!(store.queued().unwrap(), 3);
}

/// Outcomes committed together: each as `finish` would record it, a stale
/// attempt in the group changes nothing and does not stop the others.
#[test]
fn a_group_of_outcomes_records_each_and_skips_stale_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    for input in ["1", "2", "3"] {
        created(
            store
                .submit(&new_task(input, 2), None, TTL, MAX_QUEUED, 1_000)
                .unwrap(),
        );
    }
    let claimed = store.claim("a", 10, LEASE, 2_000).unwrap();
    assert_eq!(claimed.len(), 3);
    let claim = |i: usize, attempt: u32| Claim {
        id: claimed[i].id,
        attempt,
    };
    let group = [
        Finish {
            claim: claim(0, 1),
            outcome: Outcome::Succeeded("\"ok\"".into()),
            backoff: Duration::ZERO,
        },
        Finish {
            claim: claim(1, 7),
            outcome: Outcome::Succeeded("\"stale\"".into()),
            backoff: Duration::ZERO,
        },
        Finish {
            claim: claim(2, 1),
            outcome: Outcome::Failed {
                error: "again".into(),
                retry: true,
            },
            backoff: Duration::from_secs(5),
        },
    ];
    let done = store.finish_many(&group, 3_000).unwrap();
    assert_eq!(done.len(), 3);
    let ok = done[0].as_ref().unwrap();
    assert_eq!((ok.state, ok.has_result), (State::Succeeded, true));
    assert_eq!(store.result(ok.id).unwrap().as_deref(), Some("\"ok\""));
    assert_eq!(done[1], None, "a stale attempt changes nothing");
    assert_eq!(
        store.get(claimed[1].id).unwrap().unwrap().state,
        State::Running
    );
    let retry = done[2].as_ref().unwrap();
    assert_eq!((retry.state, retry.run_at), (State::Queued, 8_000));
    assert_eq!(store.queued().unwrap(), 1);
}
