//! Pausing and resuming the queue or one domain (`Queue::pause`), on one
//! Redis server and on every node of a Redis Cluster: paused jobs are not
//! claimed but stay waiting (counted, deduplicating requests, upgraded to
//! the urgent lane), running jobs finish and their follow-ups and retries
//! wait with the rest, the repair sweep leaves parked jobs alone, and a
//! resumption wakes idle workers and delivers every job.

use std::time::Duration;

use compactor_e2e::cluster::{RedisCluster, NODES};
use compactor_e2e::{key, TestRedis};
use compactor_producer::queue::{
    ClaimOutcome, ClaimedJob, Completion, EnqueueOutcome, FailAction, Failure, JobState, JobView,
    PauseScope, Queue, Trigger,
};
use compactor_shared::{Domain, EntityKey};

fn support(entity: &str) -> EntityKey {
    EntityKey::parse("support", entity).unwrap()
}

fn chat_domain() -> PauseScope {
    PauseScope::Domain(Domain::parse("chat").unwrap())
}

async fn claim(q: &Queue) -> Option<ClaimedJob> {
    match q.claim("w1").await.unwrap() {
        ClaimOutcome::Claimed(job) => Some(job),
        ClaimOutcome::Empty { .. } => None,
        ClaimOutcome::Unusable { member, error } => panic!("unusable {member}: {error}"),
    }
}

/// Claims until nothing is due: the keys claimed, in order.
async fn drain(q: &Queue) -> Vec<EntityKey> {
    let mut keys = Vec::new();
    while let Some(job) = claim(q).await {
        assert_eq!(q.complete(&job).await.unwrap(), Completion::Done);
        keys.push(job.key);
    }
    keys
}

/// Waits for the next wake-up notice on `q`'s channel.
async fn woken(sub: &mut compactor_producer::queue::Subscription) {
    sub.next(Duration::from_secs(1)).await.unwrap();
}

async fn a_paused_queue_holds_its_jobs_until_resumed(q: &Queue) {
    let (a, b, r) = (key("a"), key("b"), key("r"));
    q.request_compaction(&r, Trigger::Auto).await.unwrap();
    let running = claim(q).await.expect("r runs");
    let EnqueueOutcome::Added { job_id: a_id } =
        q.request_compaction(&a, Trigger::Auto).await.unwrap()
    else {
        panic!("a added")
    };
    q.request_compaction(&b, Trigger::Auto).await.unwrap();

    let state = q.pause(&PauseScope::Queue).await.unwrap();
    assert!(state.queue_paused && state.paused_domains.is_empty());
    assert!(state.oldest_waiting_ms.is_some(), "a and b wait");
    // Pausing twice changes nothing.
    assert!(q.pause(&PauseScope::Queue).await.unwrap().queue_paused);

    // Nothing is handed out, and nothing says a job is due.
    let ClaimOutcome::Empty { next_due_in } = q.claim("w1").await.unwrap() else {
        panic!("a paused queue hands out nothing")
    };
    assert_eq!(next_due_in, None);
    // Paused jobs still deduplicate, and an urgent request still upgrades.
    assert_eq!(
        q.request_compaction(&a, Trigger::Reactive).await.unwrap(),
        EnqueueOutcome::Coalesced { job_id: a_id }
    );
    assert_eq!(
        q.request_compaction(&r, Trigger::Auto).await.unwrap(),
        EnqueueOutcome::FollowUpRecorded {
            job_id: running.job_id
        }
    );
    // The running job finishes; its follow-up waits, paused.
    let Completion::FollowUpAdded { .. } = q.complete(&running).await.unwrap() else {
        panic!("the follow-up is added")
    };
    assert!(claim(q).await.is_none());
    let counts = q.counts().await.unwrap();
    assert_eq!((counts.waiting, counts.running, counts.done), (3, 0, 1));
    assert_eq!(counts.waiting_urgent, 1, "a moved to the urgent lane");

    let mut wakeups = q.subscribe_wakeups().await.unwrap();
    let state = q.resume(&PauseScope::Queue).await.unwrap();
    assert!(!state.any_paused());
    woken(&mut wakeups).await;
    // Every job is delivered, the urgent one first.
    let order = drain(q).await;
    assert_eq!(order.len(), 3);
    assert_eq!(order[0], a);
    assert!(order.contains(&b) && order.contains(&r));
    assert_eq!(q.pause_state().await.unwrap().oldest_waiting_ms, None);
}

async fn a_paused_domain_is_parked_while_the_others_run(q: &Queue) {
    let (c1, c2, s1) = (key("c1"), key("c2"), support("s1"));
    // A chat job runs when its domain is paused.
    let cr = key("cr");
    q.request_compaction(&cr, Trigger::Auto).await.unwrap();
    let running = claim(q).await.expect("cr runs");
    let EnqueueOutcome::Added { job_id: c1_id } =
        q.request_compaction(&c1, Trigger::Auto).await.unwrap()
    else {
        panic!("c1 added")
    };
    q.request_compaction(&c2, Trigger::Auto).await.unwrap();
    q.request_compaction(&s1, Trigger::Auto).await.unwrap();

    let state = q.pause(&chat_domain()).await.unwrap();
    assert!(!state.queue_paused);
    assert_eq!(state.paused_domains.len(), 1);
    assert_eq!(state.paused_domains[0].domain.as_str(), "chat");

    // Only the other domain's job is claimed; the chat jobs met are parked.
    let job = claim(q).await.expect("s1 runs");
    assert_eq!(job.key, s1);
    q.complete(&job).await.unwrap();
    assert!(claim(q).await.is_none());
    let counts = q.counts().await.unwrap();
    assert_eq!((counts.waiting, counts.waiting_parked), (2, 2));
    let state = q.pause_state().await.unwrap();
    assert_eq!(state.paused_domains[0].parked, 2);
    assert!(state.oldest_waiting_ms.is_some(), "parked jobs are waiting");
    assert_eq!(
        state.oldest_runnable_ms, None,
        "but none can be claimed: nothing for workers to fall behind on"
    );
    // Another domain's job waits, younger than the parked ones: it is the
    // runnable age.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let s2 = support("s2");
    q.request_compaction(&s2, Trigger::Auto).await.unwrap();
    let state = q.pause_state().await.unwrap();
    let (oldest, runnable) = (
        state.oldest_waiting_ms.unwrap(),
        state.oldest_runnable_ms.expect("s2 can be claimed"),
    );
    assert!(oldest >= 100 && runnable < oldest, "{runnable} < {oldest}");
    let job = claim(q).await.expect("s2 runs");
    assert_eq!(job.key, s2);
    q.complete(&job).await.unwrap();
    assert_eq!(
        q.job_state(&c1).await.unwrap(),
        Some(JobState::Waiting { job_id: c1_id })
    );
    // Looked up by id, a parked job is the waiting job it is (it was a
    // 404 while it sat in its domain's parked set).
    let parked = q.job(c1_id).await.unwrap().expect("the parked job by id");
    assert_eq!((parked.job_id, parked.state), (c1_id, JobView::Waiting));

    // Parked jobs deduplicate, and an urgent request upgrades one's lane.
    assert_eq!(
        q.request_compaction(&c1, Trigger::Manual { instructions: None })
            .await
            .unwrap(),
        EnqueueOutcome::Coalesced { job_id: c1_id }
    );
    // The repair sweep knows them as waiting, not lost.
    let repair = q.repair_jobs(&[c1.clone(), c2.clone()]).await.unwrap();
    assert_eq!(repair.repaired(), 0);
    while !q.repair_step(1000).await.unwrap().walk_ended {}
    assert_eq!(q.counts().await.unwrap().waiting_parked, 2);

    // The running chat job fails and backs off: its retry waits, paused.
    assert_eq!(
        q.fail(
            &running,
            FailAction::Retry {
                delay: Duration::ZERO
            },
            "boom"
        )
        .await
        .unwrap(),
        Failure::RetryScheduled
    );
    // A new chat job waits too; the other domain still runs.
    q.request_compaction(&key("c3"), Trigger::Auto)
        .await
        .unwrap();
    q.request_compaction(&support("s2"), Trigger::Auto)
        .await
        .unwrap();
    assert_eq!(drain(q).await, [support("s2")]);
    assert_eq!(q.counts().await.unwrap().waiting, 4);

    let mut wakeups = q.subscribe_wakeups().await.unwrap();
    let state = q.resume(&chat_domain()).await.unwrap();
    assert!(!state.any_paused());
    woken(&mut wakeups).await;
    let counts = q.counts().await.unwrap();
    assert_eq!((counts.waiting, counts.waiting_parked), (4, 0));
    assert_eq!(counts.waiting_urgent, 1, "c1 kept its upgrade");
    let order = drain(q).await;
    assert_eq!(order.len(), 4);
    assert_eq!(order[0], c1, "the urgent lane first");
    for k in [c2, cr, key("c3")] {
        assert!(order.contains(&k), "{k} delivered");
    }
}

async fn a_domain_and_the_queue_pause_independently(q: &Queue) {
    q.request_compaction(&key("c"), Trigger::Auto)
        .await
        .unwrap();
    q.request_compaction(&support("s"), Trigger::Auto)
        .await
        .unwrap();
    q.pause(&chat_domain()).await.unwrap();
    q.pause(&PauseScope::Queue).await.unwrap();
    let state = q.pause_state().await.unwrap();
    assert!(state.holds(&Domain::parse("support").unwrap()));
    assert!(claim(q).await.is_none());
    // Resuming the queue leaves the domain paused.
    let state = q.resume(&PauseScope::Queue).await.unwrap();
    assert!(!state.queue_paused && state.paused_domains.len() == 1);
    assert_eq!(drain(q).await, [support("s")]);
    q.resume(&chat_domain()).await.unwrap();
    assert_eq!(drain(q).await, [key("c")]);
    // Resuming what runs changes nothing.
    assert!(!q.resume(&chat_domain()).await.unwrap().any_paused());
}

#[tokio::test]
async fn a_paused_queue_holds_its_jobs_until_resumed_on_redis() {
    let t = TestRedis::new();
    a_paused_queue_holds_its_jobs_until_resumed(&t.queue().await).await;
}

#[tokio::test]
async fn a_paused_domain_is_parked_while_the_others_run_on_redis() {
    let t = TestRedis::new();
    a_paused_domain_is_parked_while_the_others_run(&t.queue().await).await;
}

#[tokio::test]
async fn a_domain_and_the_queue_pause_independently_on_redis() {
    let t = TestRedis::new();
    a_domain_and_the_queue_pause_independently(&t.queue().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_and_resume_work_on_every_node_of_a_cluster() {
    for node in 0..NODES {
        let t = TestRedis::on_cluster(RedisCluster::shared(), node);
        a_paused_queue_holds_its_jobs_until_resumed(&t.queue().await).await;
        let t = TestRedis::on_cluster(RedisCluster::shared(), node);
        a_paused_domain_is_parked_while_the_others_run(&t.queue().await).await;
        let t = TestRedis::on_cluster(RedisCluster::shared(), node);
        a_domain_and_the_queue_pause_independently(&t.queue().await).await;
    }
}
