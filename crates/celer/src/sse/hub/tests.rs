//! Unit tests of the hub: the ring, replay, limits at their edges, the
//! dropping of slow subscribers, and where subscribers are woken.

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, ThreadId};
use std::time::Duration;

use bytes::Bytes;

use super::{Chunk, Hub, Subscriber};
use crate::sse::Event;

fn poll(sub: &mut Subscriber) -> Poll<Option<Bytes>> {
    let waker = futures_util::task::noop_waker();
    sub.poll_next(&mut Context::from_waker(&waker))
        .map(|chunk| {
            chunk.map(|chunk| match chunk {
                Chunk::Plain(bytes) => bytes,
                Chunk::Gzip(segment) => segment.bytes,
            })
        })
}

/// Everything the subscriber can read now, as text; `ended` when its
/// stream is over.
fn drain(sub: &mut Subscriber) -> (Vec<String>, bool) {
    let mut out = Vec::new();
    loop {
        match poll(sub) {
            Poll::Ready(Some(bytes)) => out.push(String::from_utf8(bytes.to_vec()).unwrap()),
            Poll::Ready(None) => return (out, true),
            Poll::Pending => return (out, false),
        }
    }
}

fn data(n: usize) -> Event {
    Event::new().id(n.to_string()).data(n.to_string())
}

fn wire(n: usize) -> String {
    format!("id: {n}\ndata: {n}\n\n")
}

fn publish(hub: &Hub, range: std::ops::RangeInclusive<usize>) {
    for n in range {
        hub.publish(data(n)).unwrap();
    }
}

#[test]
fn an_event_is_encoded_once_for_every_subscriber() {
    let hub = Hub::new();
    let mut a = hub.subscriber(None, false).unwrap();
    let mut b = hub.subscriber(None, false).unwrap();
    hub.publish(Event::new().data("shared")).unwrap();
    let (Poll::Ready(Some(x)), Poll::Ready(Some(y))) = (poll(&mut a), poll(&mut b)) else {
        panic!("both subscribers should have the event");
    };
    assert_eq!(x, y);
    assert_eq!(x.as_ptr(), y.as_ptr(), "the same bytes, not a copy");
}

#[test]
fn events_without_an_id_get_the_hubs_counting_from_one() {
    let hub = Hub::new();
    let mut sub = hub.subscriber(None, false).unwrap();
    assert_eq!(hub.publish(Event::new().data("a")).unwrap(), 1);
    assert_eq!(hub.publish(Event::new().id("mine").data("b")).unwrap(), 2);
    assert_eq!(hub.publish(Event::new().data("c")).unwrap(), 3);
    let (events, _) = drain(&mut sub);
    let epoch = &hub.inner.epoch;
    assert_eq!(
        events,
        [
            format!("id: {epoch}.1\ndata: a\n\n"),
            "id: mine\ndata: b\n\n".to_owned(),
            format!("id: {epoch}.3\ndata: c\n\n"),
        ]
    );
    // The hub's own ids resume like any other.
    let mut resumed = hub.subscriber(Some(&format!("{epoch}.1")), false).unwrap();
    assert_eq!(drain(&mut resumed).0.len(), 2);
}

#[test]
fn resume_replays_what_came_after_the_last_id() {
    let hub = Hub::builder().history(3).build();
    publish(&hub, 1..=5);
    // The history is 3, 4, 5.
    let mut sub = hub.subscriber(Some("3"), false).unwrap();
    assert_eq!(drain(&mut sub).0, [wire(4), wire(5)]);
    let mut sub = hub.subscriber(Some("5"), false).unwrap();
    assert_eq!(drain(&mut sub), (vec![], false));
    // Just out of the history: everything the hub still has.
    let mut sub = hub.subscriber(Some("2"), false).unwrap();
    assert_eq!(drain(&mut sub).0, [wire(3), wire(4), wire(5)]);
    let mut sub = hub.subscriber(Some("never"), false).unwrap();
    assert_eq!(drain(&mut sub).0, [wire(3), wire(4), wire(5)]);
    assert_eq!(hub.stats().history, 3);
}

#[test]
fn a_gap_sends_the_gap_event_before_the_history() {
    let hub = Hub::builder()
        .history(2)
        .gap_event(Event::new().event("reset").data(""))
        .build();
    publish(&hub, 1..=3);
    let mut sub = hub.subscriber(Some("1"), false).unwrap();
    assert_eq!(
        drain(&mut sub).0,
        ["event: reset\ndata: \n\n".to_owned(), wire(2), wire(3)]
    );
    // A known id, or none at all, is no gap.
    let mut sub = hub.subscriber(Some("2"), false).unwrap();
    assert_eq!(drain(&mut sub).0, [wire(3)]);
    let mut sub = hub.subscriber(None, false).unwrap();
    assert!(drain(&mut sub).0.is_empty());
}

#[test]
fn new_subscribers_get_the_initial_events() {
    let hub = Hub::builder().history(4).initial(2).build();
    let mut early = hub.subscriber(None, false).unwrap();
    assert!(drain(&mut early).0.is_empty(), "nothing published yet");
    publish(&hub, 1..=5);
    let mut sub = hub.subscriber(None, false).unwrap();
    assert_eq!(drain(&mut sub).0, [wire(4), wire(5)]);
    // Never more than the history.
    let hub = Hub::builder().history(1).initial(10).build();
    publish(&hub, 1..=3);
    let mut sub = hub.subscriber(None, false).unwrap();
    assert_eq!(drain(&mut sub).0, [wire(3)]);
}

#[test]
fn no_history_means_every_reconnect_is_a_gap() {
    let hub = Hub::builder().history(0).build();
    publish(&hub, 1..=3);
    let mut sub = hub.subscriber(Some("3"), false).unwrap();
    assert!(drain(&mut sub).0.is_empty());
    assert_eq!(hub.stats().history, 0);
}

#[test]
fn a_subscriber_one_event_over_its_buffer_is_dropped() {
    let hub = Hub::builder().history(0).buffer(4).build();
    let mut slow = hub.subscriber(None, false).unwrap();
    let mut fast = hub.subscriber(None, false).unwrap();
    publish(&hub, 1..=4);
    assert_eq!(drain(&mut fast).0.len(), 4);
    // Exactly at the limit: still subscribed.
    assert_eq!(hub.stats().subscribers, 2);
    assert_eq!(hub.stats().dropped, 0);
    publish(&hub, 5..=5);
    let stats = hub.stats();
    assert_eq!((stats.subscribers, stats.dropped), (1, 1));
    // Its stream ends at once, without the events it had not read.
    assert_eq!(drain(&mut slow), (vec![], true));
    assert_eq!(drain(&mut fast), (vec![wire(5)], false));
}

#[test]
fn the_replay_of_history_does_not_count_against_the_buffer() {
    let hub = Hub::builder().history(10).buffer(2).build();
    publish(&hub, 1..=10);
    let mut sub = hub.subscriber(Some("gone"), false).unwrap();
    publish(&hub, 11..=12);
    assert_eq!(hub.stats().dropped, 0);
    let (events, ended) = drain(&mut sub);
    // The history it asked for (1..=10), then the two live events.
    assert_eq!(events.len(), 12);
    assert!(!ended);
    // Two behind the newest from where it joined is its limit; a third
    // drops it.
    let mut idle = hub.subscriber(Some("gone"), false).unwrap();
    publish(&hub, 13..=14);
    assert_eq!(drain(&mut sub).0.len(), 2);
    assert_eq!(hub.stats().dropped, 0);
    publish(&hub, 15..=15);
    assert_eq!(hub.stats().dropped, 1);
    assert_eq!(drain(&mut idle), (vec![], true));
}

#[test]
fn the_hub_holds_at_most_its_buffer_bytes() {
    // Each event is 15 bytes ("id: n\ndata: n\n\n" for one digit).
    let one = wire(1).len();
    let hub = Hub::builder()
        .history(100)
        .buffer(100)
        .buffer_bytes(4 * one)
        .max_event_bytes(one)
        .build();
    let mut slow = hub.subscriber(None, false).unwrap();
    publish(&hub, 1..=4);
    assert_eq!(hub.stats().buffered_bytes, 4 * wire(1).len());
    assert_eq!(hub.stats().dropped, 0);
    publish(&hub, 5..=9);
    let stats = hub.stats();
    assert_eq!(stats.buffered_bytes, 4 * one, "{stats:?}");
    assert_eq!(stats.history, 4, "the history is cut to the bytes too");
    assert_eq!(stats.dropped, 1, "its first unread event was let go");
    assert_eq!(drain(&mut slow), (vec![], true));
}

#[test]
fn events_over_the_size_limit_are_refused() {
    let at_limit = wire(1).len();
    let hub = Hub::builder().max_event_bytes(at_limit).build();
    assert!(hub.publish(data(1)).is_ok());
    let err = hub.publish(data(10)).unwrap_err();
    assert!(err.is_too_large());
    assert_eq!(
        err.to_string(),
        format!(
            "event of {} bytes is over the limit of {at_limit}",
            at_limit + 2
        )
    );
    assert_eq!(hub.stats().published, 1);
}

#[test]
fn subscribers_over_the_limit_are_refused() {
    let hub = Hub::builder().max_subscribers(2).build();
    let a = hub.subscriber(None, false).unwrap();
    let _b = hub.subscriber(None, false).unwrap();
    assert!(hub.subscriber(None, false).unwrap_err().is_full());
    assert_eq!(hub.stats().refused, 1);
    drop(a);
    assert_eq!(hub.stats().subscribers, 1);
    let _c = hub.subscriber(None, false).expect("a slot was freed");
    assert_eq!(hub.stats().subscribers, 2);
}

#[test]
fn a_closed_hub_ends_streams_after_the_events_published() {
    let hub = Hub::new();
    let mut sub = hub.subscriber(None, false).unwrap();
    publish(&hub, 1..=2);
    hub.close();
    assert!(hub.publish(data(3)).unwrap_err().is_closed());
    assert_eq!(drain(&mut sub), (vec![wire(1), wire(2)], true));
    // A reconnect that missed the end still gets it, then the end.
    let mut late = hub.subscriber(Some("1"), false).unwrap();
    assert_eq!(drain(&mut late), (vec![wire(2)], true));
    // One that has it all is told to stop.
    assert!(hub.subscriber(Some("2"), false).unwrap_err().is_closed());
    assert!(hub.subscriber(None, false).unwrap_err().is_closed());
}

#[test]
fn publishing_from_many_threads_keeps_one_order() {
    let hub = Hub::builder().history(1000).buffer(1000).build();
    let mut sub = hub.subscriber(None, false).unwrap();
    std::thread::scope(|scope| {
        for t in 0..4 {
            let hub = hub.clone();
            scope.spawn(move || {
                for n in 0..100 {
                    hub.publish(Event::new().data(format!("{t}-{n}"))).unwrap();
                }
            });
        }
    });
    let (events, _) = drain(&mut sub);
    assert_eq!(events.len(), 400);
    // The hub's ids follow the order the subscriber reads.
    let seqs: Vec<u64> = events
        .iter()
        .map(|e| {
            let id = e.lines().next().unwrap().strip_prefix("id: ").unwrap();
            id.rsplit('.').next().unwrap().parse().unwrap()
        })
        .collect();
    assert_eq!(seqs, (1..=400).collect::<Vec<_>>());
    // Each thread's events in the order it sent them.
    for t in 0..4 {
        let mine: Vec<&String> = events
            .iter()
            .filter(|e| e.contains(&format!("data: {t}-")))
            .collect();
        for (n, event) in mine.iter().enumerate() {
            assert!(event.ends_with(&format!("data: {t}-{n}\n\n")));
        }
    }
}

/// A waker that notes the thread of each wake.
#[derive(Default)]
struct Recorder {
    wakes: Mutex<Vec<ThreadId>>,
}

impl Wake for Recorder {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.lock().unwrap().push(thread::current().id());
    }
}

impl Recorder {
    fn wakes(&self) -> Vec<ThreadId> {
        self.wakes.lock().unwrap().clone()
    }
}

/// A subscriber polled once with a recording waker: it waits.
fn waiting(hub: &Hub) -> (Subscriber, Arc<Recorder>) {
    let mut sub = hub.subscriber(None, false).unwrap();
    let recorder = Arc::new(Recorder::default());
    let waker = Waker::from(recorder.clone());
    assert!(sub.poll_next(&mut Context::from_waker(&waker)).is_pending());
    (sub, recorder)
}

/// Publishes event 1 from a thread of its own; returns that thread's id.
fn publish_elsewhere(hub: &Hub) -> ThreadId {
    let hub = hub.clone();
    thread::spawn(move || {
        hub.publish(data(1)).unwrap();
        thread::current().id()
    })
    .join()
    .unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Lets the runtime run its other tasks until every recorder was woken
/// (bounded: a lost wake fails the test instead of hanging it).
async fn until_woken(recorders: &[Arc<Recorder>]) {
    tokio::time::timeout(Duration::from_secs(30), async {
        while recorders.iter().any(|r| r.wakes().is_empty()) {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("every subscriber is woken");
}

#[test]
fn a_publish_from_another_thread_wakes_subscribers_from_their_own_thread() {
    let hub = Hub::new();
    let here = thread::current().id();
    runtime().block_on(async {
        let (mut subs, recorders): (Vec<_>, Vec<_>) = (0..3).map(|_| waiting(&hub)).unzip();
        let elsewhere = publish_elsewhere(&hub);
        assert_ne!(elsewhere, here);
        // The publisher woke none of them: it called the task of their
        // thread, which wakes them when this runtime runs it.
        assert!(recorders.iter().all(|r| r.wakes().is_empty()));
        until_woken(&recorders).await;
        for (sub, recorder) in subs.iter_mut().zip(&recorders) {
            assert_eq!(recorder.wakes(), vec![here]);
            assert_eq!(drain(sub), (vec![wire(1)], false));
        }
    });
}

#[test]
fn a_publish_on_the_subscribers_thread_wakes_them_at_once() {
    let hub = Hub::new();
    let here = thread::current().id();
    runtime().block_on(async {
        let (mut sub, recorder) = waiting(&hub);
        hub.publish(data(1)).unwrap();
        assert_eq!(recorder.wakes(), vec![here]);
        assert_eq!(drain(&mut sub), (vec![wire(1)], false));
    });
}

#[test]
fn subscribers_whose_runtime_is_gone_are_woken_by_the_publisher() {
    let hub = Hub::new();
    // Subscribed inside a runtime that then shuts down, taking the task
    // of the thread's group with it.
    let (mut sub, recorder) = runtime().block_on(async { waiting(&hub) });
    let elsewhere = publish_elsewhere(&hub);
    assert_eq!(recorder.wakes(), vec![elsewhere]);
    assert_eq!(drain(&mut sub), (vec![wire(1)], false));
}

#[test]
fn a_thread_with_a_new_runtime_gets_a_new_waking_task() {
    let hub = Hub::new();
    let here = thread::current().id();
    // The first runtime's task is gone with it; the old subscriber stays.
    let (mut old, old_recorder) = runtime().block_on(async { waiting(&hub) });
    runtime().block_on(async {
        let (mut sub, recorder) = waiting(&hub);
        let elsewhere = publish_elsewhere(&hub);
        until_woken(std::slice::from_ref(&recorder)).await;
        assert_eq!(recorder.wakes(), vec![here]);
        assert_eq!(drain(&mut sub), (vec![wire(1)], false));
        // The old subscriber's group is this thread's again: its new task
        // woke it, or the publisher did if it saw the old task gone.
        until_woken(std::slice::from_ref(&old_recorder)).await;
        assert!(old_recorder.wakes() == vec![here] || old_recorder.wakes() == vec![elsewhere]);
        assert_eq!(drain(&mut old), (vec![wire(1)], false));
    });
}

#[test]
fn slow_subscribers_of_another_thread_are_dropped_by_the_publisher() {
    let hub = Hub::builder().buffer(1).build();
    runtime().block_on(async {
        let (mut sub, recorder) = waiting(&hub);
        publish_elsewhere(&hub);
        // Two behind: the second publish drops it, at once.
        publish_elsewhere(&hub);
        assert_eq!(hub.stats().dropped, 1);
        assert_eq!(hub.stats().subscribers, 0);
        until_woken(&[recorder]).await;
        assert_eq!(drain(&mut sub), (vec![], true));
    });
}

#[test]
fn the_waking_task_ends_with_the_hub() {
    runtime().block_on(async {
        let metrics = tokio::runtime::Handle::current().metrics();
        let hub = Hub::new();
        let (sub, _) = waiting(&hub);
        assert_eq!(metrics.num_alive_tasks(), 1);
        drop(sub);
        drop(hub);
        tokio::time::timeout(Duration::from_secs(30), async {
            while metrics.num_alive_tasks() > 0 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the task ends when the hub is dropped");
    });
}

/// Checks the registry's group lists against its slots: each subscriber
/// of a group is in that group's list once, at the place its slot notes.
fn assert_groups_whole(hub: &Hub) {
    let registry = hub.inner.registry();
    let mut grouped = 0;
    for (g, group) in registry.groups.iter().enumerate() {
        for (place, &index) in group.members.iter().enumerate() {
            let held = registry.slots[index]
                .as_ref()
                .expect("a member is a live slot");
            assert_eq!(held.member, place);
            assert_eq!(held.slot.group as usize, g);
        }
        grouped += group.members.len();
    }
    let live_grouped = registry
        .slots
        .iter()
        .flatten()
        .filter(|held| (held.slot.group as usize) < registry.groups.len())
        .count();
    assert_eq!(grouped, live_grouped);
    assert_eq!(registry.slots.iter().flatten().count(), registry.live);
}

#[test]
fn a_subscriber_leaving_takes_its_place_in_its_groups_list() {
    let hub = Hub::new();
    let here = thread::current().id();
    runtime().block_on(async {
        let (mut subs, mut recorders): (Vec<_>, Vec<_>) = (0..4).map(|_| waiting(&hub)).unzip();
        assert_groups_whole(&hub);
        // The first and the last of the list leave: the last's place is
        // the first's now, and nothing of either stays.
        drop(subs.remove(0));
        recorders.remove(0);
        drop(subs.pop());
        recorders.pop();
        assert_groups_whole(&hub);
        assert_eq!(hub.inner.registry().groups[0].members.len(), 2);
        publish_elsewhere(&hub);
        until_woken(&recorders).await;
        for (sub, recorder) in subs.iter_mut().zip(&recorders) {
            assert_eq!(recorder.wakes(), vec![here]);
            assert_eq!(drain(sub), (vec![wire(1)], false));
        }
    });
}

#[test]
fn a_group_emptied_wakes_no_one_and_takes_the_threads_next_subscriber() {
    let hub = Hub::builder().buffer(1).build();
    let here = thread::current().id();
    runtime().block_on(async {
        let (subs, recorders): (Vec<_>, Vec<_>) = (0..3).map(|_| waiting(&hub)).unzip();
        drop(subs);
        assert_groups_whole(&hub);
        assert!(hub.inner.registry().groups[0].members.is_empty());
        publish_elsewhere(&hub);
        // The group's task ran for the publish and woke no one.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(recorders.iter().all(|r| r.wakes().is_empty()));
        // The thread's next subscriber joins the same group.
        let (mut sub, recorder) = waiting(&hub);
        assert_eq!(hub.inner.registry().groups.len(), 1);
        assert_eq!(hub.inner.registry().groups[0].members.len(), 1);
        hub.publish(data(2)).unwrap();
        assert_eq!(recorder.wakes(), vec![here]);
        assert_eq!(drain(&mut sub), (vec![wire(2)], false));
        // Dropped for falling behind (two behind its buffer of one): the
        // group is empty again.
        let (_lagging, lagging_recorder) = waiting(&hub);
        publish_elsewhere(&hub);
        publish_elsewhere(&hub);
        assert_eq!(hub.stats().dropped, 2);
        until_woken(&[lagging_recorder]).await;
        assert_groups_whole(&hub);
        assert!(hub.inner.registry().groups[0].members.is_empty());
    });
}

#[test]
fn a_publish_from_another_thread_reaches_every_group_exactly_once() {
    const GROUPS: usize = 3;
    const PER_GROUP: usize = 5;
    let hub = Hub::new();
    // Each thread subscribes on its own runtime, then waits for the
    // publish while its runtime runs the group's task.
    let ready = Arc::new(std::sync::Barrier::new(GROUPS + 1));
    let threads: Vec<_> = (0..GROUPS)
        .map(|_| {
            let (hub, ready) = (hub.clone(), ready.clone());
            thread::spawn(move || {
                runtime().block_on(async {
                    let (mut subs, recorders): (Vec<_>, Vec<_>) =
                        (0..PER_GROUP).map(|_| waiting(&hub)).unzip();
                    ready.wait();
                    until_woken(&recorders).await;
                    // Time for a second wake, were there one.
                    for _ in 0..10 {
                        tokio::task::yield_now().await;
                    }
                    let events: Vec<_> = subs.iter_mut().map(drain).collect();
                    let wakes: Vec<_> = recorders.iter().map(|r| r.wakes()).collect();
                    (thread::current().id(), wakes, events)
                })
            })
        })
        .collect();
    ready.wait();
    assert_eq!(hub.inner.registry().groups.len(), GROUPS);
    assert_groups_whole(&hub);
    hub.publish(data(1)).unwrap();
    for handle in threads {
        let (thread, wakes, events) = handle.join().unwrap();
        assert_eq!(wakes, vec![vec![thread]; PER_GROUP]);
        assert_eq!(events, vec![(vec![wire(1)], false); PER_GROUP]);
    }
}
