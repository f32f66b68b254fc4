//! The web console in a real browser: Debian's headless `chromium`,
//! driven through `chromedriver` (`compactor_e2e::webdriver`), against a
//! live worker with real data (`compactor_e2e::console::ConsoleFixture`:
//! PostgreSQL, Redis, summaries from the fake LLM).
//!
//! A test target of its own, not run by `cargo test --workspace` (it
//! needs the browser): `tests/browser/run` installs chromium when missing
//! (`tests/browser/install`) and runs it; CI does that as a step of its
//! own. With `COMPACTOR_CONSOLE_SCREENSHOTS=<dir>` (relative to the
//! workspace root) it saves a screenshot of each page there —
//! `tests/browser/screenshots` writes those of `docs/console/`.
//!
//! Bounded: the whole test has [`LIMIT`], each WebDriver command its own
//! timeout.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::path::PathBuf;
use std::time::Duration;

use compactor_e2e::console::ConsoleFixture;
use compactor_e2e::webdriver::Browser;
use compactor_e2e::{eventually, eventually_some, Fault};
use compactor_producer::queue::JobView;
use compactor_shared::EntityKey;

/// Longest the whole browser test may take.
const LIMIT: Duration = Duration::from_secs(240);

const TOKEN: &str = "browser-s3cret-token";

/// Where screenshots go, if they are wanted.
fn screenshot_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("COMPACTOR_CONSOLE_SCREENSHOTS")?;
    let dir = PathBuf::from(dir);
    Some(if dir.is_absolute() {
        dir
    } else {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(dir)
    })
}

async fn shot(browser: &Browser, name: &str) {
    if let Some(dir) = screenshot_dir() {
        browser.screenshot(&dir.join(format!("{name}.png"))).await;
    }
}

/// Waits (a form was sent) until the browser is at a URL ending in
/// `suffix`.
async fn until_url(browser: &Browser, suffix: &str) {
    eventually(suffix, Duration::from_secs(10), || async {
        browser.current_url().await.ends_with(suffix)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_in_a_browser() {
    tokio::time::timeout(LIMIT, console_in_a_browser())
        .await
        .expect("the browser test ends within its limit");
}

async fn console_in_a_browser() {
    let f = ConsoleFixture::start(Some(TOKEN)).await;
    let browser = Browser::start(1280, 900).await;
    let base = f.base.clone();
    let timeline = ConsoleFixture::path_of(&f.timeline);
    let run = f.newest_run(&f.timeline).await;
    let diff = format!("{timeline}/runs/{run}/diff");
    let pages = [
        "/ui".to_owned(),
        "/ui/workers".to_owned(),
        "/ui/dead-letters".to_owned(),
        "/ui/workstreams?domain=chat".to_owned(),
        timeline.clone(),
        diff.clone(),
    ];

    // Signed out: every page is the login page, and nothing of the data.
    for path in &pages {
        browser.goto(&format!("{base}{path}")).await;
        let source = browser.source().await;
        assert!(source.contains("action=\"/ui/login\""), "{path}: {source}");
        for secret in [
            f.timeline.entity_id(),
            f.dead.entity_id(),
            "module_",
            "Turn ",
        ] {
            assert!(!source.contains(secret), "{path} shows {secret:?}");
        }
    }
    shot(&browser, "login").await;

    // Sign in through the form.
    browser.goto(&format!("{base}/ui/login")).await;
    let field = browser.find("#token").await;
    browser.type_into(&field, TOKEN).await;
    browser
        .click(&browser.find("form.login button").await)
        .await;
    until_url(&browser, "/ui").await;

    // Every page loads with its data.
    for (path, name, expect) in [
        ("/ui", "overview", "id=\"count-dead\""),
        ("/ui/workers", "workers", "id=\"workers\""),
        ("/ui/dead-letters", "dead-letters", f.dead.entity_id()),
        (
            "/ui/workstreams?domain=chat",
            "workstreams",
            f.timeline.entity_id(),
        ),
        (timeline.as_str(), "timeline", "id=\"timeline\""),
        (diff.as_str(), "diff", "id=\"diff\""),
    ] {
        browser.goto(&format!("{base}{path}")).await;
        let source = browser.source().await;
        assert!(source.contains(expect), "{path}: {source}");
        shot(&browser, name).await;
    }
    browser.resize(390, 844).await;
    browser.goto(&format!("{base}/ui")).await;
    shot(&browser, "overview-phone").await;
    browser.goto(&format!("{base}{timeline}")).await;
    shot(&browser, "timeline-phone").await;
    browser.resize(1280, 900).await;

    // The timeline: a collapsed section of a run opens when clicked.
    browser.goto(&format!("{base}{timeline}")).await;
    let runs = browser.count("#timeline > li").await;
    assert_eq!(runs, 2);
    let collapsed = browser.find("#timeline details.section:not([open])").await;
    assert_eq!(browser.property(&collapsed, "open").await, false);
    browser
        .click(
            &browser
                .find("#timeline details.section:not([open]) > summary")
                .await,
        )
        .await;
    assert_eq!(browser.property(&collapsed, "open").await, true);

    // Retry the dead letter: it completes.
    browser.goto(&format!("{base}/ui/dead-letters")).await;
    browser.click(&browser.find("button.retry").await).await;
    until_url(&browser, "notice=retried").await;
    eventually(
        "the retried compaction commits",
        Duration::from_secs(30),
        || async {
            f.db.store
                .workstream(&f.dead)
                .await
                .unwrap()
                .is_some_and(|ws| ws.compactions == 1)
        },
    )
    .await;
    browser
        .goto(&format!("{base}{}", ConsoleFixture::path_of(&f.dead)))
        .await;
    assert_eq!(browser.count("#timeline > li.committed").await, 1);

    // Purge asks first (a confirm dialog): cancelled, nothing happens;
    // confirmed, the dead letter is gone.
    let other = EntityKey::parse("chat", &compactor_e2e::unique_name("purged")).unwrap();
    f.dead_letter(&other).await;
    browser.goto(&format!("{base}/ui/dead-letters")).await;
    browser.click(&browser.find("button.purge").await).await;
    assert!(browser.dialog_text().await.contains("cannot be retried"));
    browser.answer_dialog(false).await;
    assert!(browser.current_url().await.ends_with("/ui/dead-letters"));
    assert_eq!(f.client.queue().dead_letters(10).await.unwrap().len(), 1);
    browser.click(&browser.find("button.purge").await).await;
    browser.answer_dialog(true).await;
    until_url(&browser, "notice=purged").await;
    assert!(f.client.queue().dead_letters(10).await.unwrap().is_empty());

    // Pause and resume the queue: pausing asks first (a confirm dialog),
    // and the queue's own state follows each click.
    browser.goto(&format!("{base}/ui/queue")).await;
    browser.click(&browser.find("#pause-queue").await).await;
    assert!(browser
        .dialog_text()
        .await
        .contains("Pause the whole queue?"));
    browser.answer_dialog(true).await;
    until_url(&browser, "notice=paused").await;
    assert!(f.client.queue().pause_state().await.unwrap().queue_paused);
    shot(&browser, "pause").await;

    // While paused, a requested compaction waits: the jobs page lists it,
    // and its cancel asks first, then dead-letters it.
    let held = EntityKey::parse("chat", &compactor_e2e::unique_name("held")).unwrap();
    f.client
        .append_messages(&held, compactor_e2e::conversation(10))
        .await
        .unwrap();
    f.client.compact_now(&held, None).await.unwrap();
    let job = f
        .client
        .queue()
        .list_jobs(JobView::Waiting, 10, None)
        .await
        .unwrap()
        .jobs
        .into_iter()
        .find(|j| j.entity_id.as_deref() == Some(held.entity_id()))
        .unwrap()
        .job_id;
    browser.goto(&format!("{base}/ui/jobs")).await;
    assert!(browser.source().await.contains(held.entity_id()));
    shot(&browser, "jobs").await;
    browser.goto(&format!("{base}/ui/jobs/{job}")).await;
    browser
        .click(&browser.find("button.cancel-dead").await)
        .await;
    assert!(browser.dialog_text().await.contains("Cancel this job?"));
    browser.answer_dialog(true).await;
    until_url(&browser, "notice=cancelled").await;
    assert_eq!(
        f.client.queue().job(job).await.unwrap().unwrap().state,
        JobView::Dead
    );
    shot(&browser, "job").await;

    browser.goto(&format!("{base}/ui/queue")).await;
    browser.click(&browser.find("#resume-queue").await).await;
    until_url(&browser, "notice=resumed").await;
    assert!(!f.client.queue().pause_state().await.unwrap().any_paused());

    // A running job: its model call hangs, the job page's cancel stops it,
    // and the attempt commits nothing.
    f.llm
        .fail_always(Some(Fault::Hang(Duration::from_secs(60))));
    let busy = EntityKey::parse("chat", &compactor_e2e::unique_name("busy")).unwrap();
    f.client
        .append_messages(&busy, compactor_e2e::conversation(10))
        .await
        .unwrap();
    f.client.compact_now(&busy, None).await.unwrap();
    let job = eventually_some("the job runs", Duration::from_secs(30), || async {
        f.client
            .queue()
            .list_jobs(JobView::Running, 10, None)
            .await
            .unwrap()
            .jobs
            .into_iter()
            .find(|j| j.entity_id.as_deref() == Some(busy.entity_id()))
            .map(|j| j.job_id)
    })
    .await;
    browser.goto(&format!("{base}/ui/jobs/{job}")).await;
    assert!(browser.source().await.contains("running"));
    browser
        .click(&browser.find("button.cancel-dead").await)
        .await;
    assert!(browser.dialog_text().await.contains("Cancel this job?"));
    browser.answer_dialog(true).await;
    until_url(&browser, "notice=cancelled").await;
    assert_eq!(
        f.client.queue().job(job).await.unwrap().unwrap().state,
        JobView::Dead
    );
    f.llm.fail_always(None);
    assert_eq!(
        f.db.store
            .workstream(&busy)
            .await
            .unwrap()
            .unwrap()
            .compactions,
        0,
        "the cancelled attempt committed nothing"
    );

    // Light by default; dark where the system prefers it.
    browser.goto(&format!("{base}/ui")).await;
    assert_eq!(background(&browser).await, "rgb(247, 247, 248)");
    browser.quit().await;
    let dark = Browser::start_with(1280, 900, &["--force-dark-mode"]).await;
    dark.goto(&format!("{base}/ui/login")).await;
    let field = dark.find("#token").await;
    dark.type_into(&field, TOKEN).await;
    dark.click(&dark.find("form.login button").await).await;
    until_url(&dark, "/ui").await;
    assert_eq!(background(&dark).await, "rgb(17, 19, 23)");
    shot(&dark, "overview-dark").await;
    dark.goto(&format!("{base}{timeline}")).await;
    shot(&dark, "timeline-dark").await;
    dark.quit().await;
    f.stop().await;
}

/// The page's background colour, as computed.
async fn background(browser: &Browser) -> String {
    browser
        .eval("return getComputedStyle(document.body).backgroundColor;")
        .await
        .as_str()
        .unwrap_or_default()
        .to_owned()
}
