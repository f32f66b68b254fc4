//! The web console at `/ui` over HTTP, against a live worker with real
//! data (PostgreSQL, Redis, summaries from the fake LLM): with a token,
//! nothing but the login page until signed in, and the session cookie's
//! attributes; every page with its data; a dead letter retried (its
//! compaction then commits) and one purged after its confirmation page;
//! forms refused without their CSRF token or from another origin. The
//! same pages in a real browser: `tests/tests/browser/`.

use std::time::Duration;

use compactor_e2e::console::{ConsoleClient, ConsoleFixture, Page};
use compactor_e2e::{conversation, eventually};
use compactor_shared::EntityKey;
use reqwest::StatusCode;

const TOKEN: &str = "console-s3cret-token";

/// Every page of the console, with the fixture's data in its paths.
async fn every_page(f: &ConsoleFixture) -> Vec<String> {
    let run = f.newest_run(&f.timeline).await;
    let letter = f.client.queue().dead_letters(1).await.unwrap()[0].clone();
    let (entry, job) = (letter.entry, letter.job_id);
    vec![
        "/ui".to_owned(),
        "/ui/workers".to_owned(),
        "/ui/dead-letters".to_owned(),
        format!(
            "/ui/dead-letters/purge?entry={}",
            entry.replace('|', "%7C").replace(':', "%3A")
        ),
        "/ui/jobs".to_owned(),
        "/ui/jobs?state=dead".to_owned(),
        format!("/ui/jobs/{job}"),
        format!("/ui/jobs/{job}/cancel?then=dead"),
        "/ui/queue".to_owned(),
        "/ui/queue/pause?domain=chat".to_owned(),
        "/ui/workstreams".to_owned(),
        format!(
            "/ui/workstreams?domain=chat&entity={}",
            f.timeline.entity_id()
        ),
        ConsoleFixture::path_of(&f.timeline),
        format!("{}/runs/{run}/diff", ConsoleFixture::path_of(&f.timeline)),
        "/ui/no-such-page".to_owned(),
    ]
}

/// Asserts `page` is the login page and shows none of the fixture's data.
fn assert_nothing_leaks(f: &ConsoleFixture, path: &str, page: &Page) {
    assert_eq!(
        page.status,
        StatusCode::UNAUTHORIZED,
        "{path}: {}",
        page.text
    );
    assert!(page.is_login(), "{path}: {}", page.text);
    for secret in [
        f.timeline.entity_id(),
        f.dead.entity_id(),
        // Conversation and summary text.
        "module_",
        "Turn ",
        // The navigation and the queue's names.
        "/ui/workers",
        f.redis.config.name.as_str(),
    ] {
        assert!(
            !page.text.contains(secret),
            "{path} shows {secret:?}: {}",
            page.text
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_token_every_console_url_answers_only_the_login_page_until_signed_in() {
    let f = ConsoleFixture::start(Some(TOKEN)).await;
    let pages = every_page(&f).await;
    let mut anonymous = ConsoleClient::new(&f.base);
    for path in &pages {
        let page = anonymous.get(path).await;
        assert_nothing_leaks(&f, path, &page);
    }
    // A form sent without a session is not acted on.
    let login = anonymous.get("/ui/login").await;
    assert_eq!(login.status, StatusCode::OK);
    let csrf = login.csrf().unwrap();
    let entry = f.client.queue().dead_letters(1).await.unwrap()[0]
        .entry
        .clone();
    let refused = anonymous
        .post(
            "/ui/dead-letters/purge",
            &[("csrf", &csrf), ("entry", &entry)],
        )
        .await;
    assert_nothing_leaks(&f, "POST purge", &refused);
    assert!(f
        .client
        .queue()
        .dead_letter(&entry)
        .await
        .unwrap()
        .is_some());
    // A forged session cookie is no session.
    let forged = reqwest::Client::new()
        .get(format!("{}/ui", f.base))
        .header("cookie", "compactor_session=99999999999.AAAA")
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::UNAUTHORIZED);
    assert!(!forged
        .text()
        .await
        .unwrap()
        .contains(f.timeline.entity_id()));

    // The wrong token: the login page again, with a message.
    let wrong = anonymous.sign_in("console-s3cret-tokeN").await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert!(wrong.text.contains("not the admin token"));
    assert!(anonymous.cookie("compactor_session").is_none());

    // The right one: a session cookie, HttpOnly and SameSite=Strict, that
    // is not the token.
    let signed = anonymous.sign_in(TOKEN).await;
    assert_eq!(signed.status, StatusCode::SEE_OTHER, "{}", signed.text);
    assert_eq!(signed.location(), Some("/ui"));
    let set = signed.set_cookie("compactor_session").unwrap();
    assert!(set.contains("HttpOnly"), "{set}");
    assert!(set.contains("SameSite=Strict"), "{set}");
    assert!(!set.contains(TOKEN), "{set}");
    for path in &pages {
        let page = anonymous.get(path).await;
        assert!(!page.is_login(), "{path}: {}", page.text);
        let expected = if path == "/ui/no-such-page" {
            StatusCode::NOT_FOUND
        } else {
            StatusCode::OK
        };
        assert_eq!(page.status, expected, "{path}: {}", page.text);
    }
    let overview = anonymous.get("/ui").await;
    assert!(overview.text.contains("Sign out"));

    // Signing out forgets the session.
    let csrf = overview.csrf().unwrap();
    let out = anonymous.post("/ui/logout", &[("csrf", &csrf)]).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert!(anonymous.cookie("compactor_session").is_none());
    assert_nothing_leaks(&f, "/ui after signing out", &anonymous.get("/ui").await);

    // The bearer token itself also opens the pages (scripts, the bench).
    let with_bearer = reqwest::Client::new()
        .get(format!("{}/ui", f.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(with_bearer.status(), StatusCode::OK);
    f.stop().await;
}

/// `(count, label)` of an overview card.
fn card(page: &Page, id: &str) -> String {
    let marker = format!("id=\"{id}\"><div class=\"n\">");
    let start = page
        .text
        .find(&marker)
        .unwrap_or_else(|| panic!("{id}: {}", page.text))
        + marker.len();
    let end = page.text[start..].find('<').unwrap() + start;
    page.text[start..end].to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_shows_the_queue_and_the_stores_data() {
    let f = ConsoleFixture::start(None).await;
    let mut c = ConsoleClient::new(&f.base);

    let overview = c.get("/ui").await;
    assert_eq!(overview.status, StatusCode::OK);
    assert_eq!(card(&overview, "count-dead"), "1");
    assert_eq!(card(&overview, "count-workers"), "1");
    assert_eq!(card(&overview, "count-done"), "2", "two compactions done");
    assert!(overview.text.contains("<svg class=\"spark\""));
    assert_eq!(
        overview.text.matches("<rect ").count(),
        60,
        "a bar per minute"
    );
    // Both compactions are among the last hour's completions.
    assert_eq!(card(&overview, "hour-card"), "2", "{}", overview.text);
    // The headers of every page: no caching, a strict policy.
    assert_eq!(overview.headers["cache-control"], "no-store");
    assert!(overview.headers["content-security-policy"]
        .to_str()
        .unwrap()
        .contains("default-src 'none'"));

    let workers = c.get("/ui/workers").await;
    assert_eq!(workers.status, StatusCode::OK);
    assert_eq!(
        workers.text.matches("<tr><td class=\"mono\">").count(),
        1,
        "{}",
        workers.text
    );

    let dead = c.get("/ui/dead-letters").await;
    assert!(dead.text.contains(f.dead.entity_id()), "{}", dead.text);
    assert!(dead.text.contains("401"), "the reason: {}", dead.text);

    let search = c
        .get(&format!(
            "/ui/workstreams?domain=chat&entity={}",
            f.timeline.entity_id()
        ))
        .await;
    assert!(
        search.text.contains(&ConsoleFixture::path_of(&f.timeline)),
        "{}",
        search.text
    );
    assert!(
        !search.text.contains(f.dead.entity_id()),
        "a prefix of another id"
    );
    let by_domain = c.get("/ui/workstreams?domain=chat").await;
    assert!(by_domain.text.contains(f.dead.entity_id()));
    let nothing = c.get("/ui/workstreams?domain=nosuchdomain").await;
    assert!(nothing.text.contains("No workstream matches."));

    let timeline = c.get(&ConsoleFixture::path_of(&f.timeline)).await;
    assert_eq!(timeline.status, StatusCode::OK);
    assert_eq!(
        timeline.text.matches("<li class=\"run committed\"").count(),
        2,
        "{}",
        timeline.text
    );
    assert!(timeline.text.contains(">manual</span>"), "the trigger");
    assert!(timeline.text.contains(" freed</strong>"));
    assert!(
        timeline.text.contains("<details class=\"section\""),
        "sections collapsible"
    );
    assert!(timeline.text.contains("Diff against the previous summary"));

    let newest = f.newest_run(&f.timeline).await;
    let diff = c
        .get(&format!(
            "{}/runs/{newest}/diff",
            ConsoleFixture::path_of(&f.timeline)
        ))
        .await;
    assert_eq!(diff.status, StatusCode::OK, "{}", diff.text);
    assert!(diff.text.contains("<pre class=\"diff\""));
    assert!(
        diff.text.contains("against run "),
        "compared with the first run: {}",
        diff.text
    );

    // Unknown things are HTML pages with their status, not JSON.
    let missing = c.get("/ui/workstreams/chat/no-such-workstream").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(missing.text.contains("<!doctype html>"));
    let bad = c.get("/ui/workstreams/Not A Domain/x").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    let bad_run = c
        .get(&format!(
            "{}/runs/x/diff",
            ConsoleFixture::path_of(&f.timeline)
        ))
        .await;
    assert_eq!(bad_run.status, StatusCode::BAD_REQUEST);
    f.stop().await;
}

/// The entry of `key`'s dead letter, once there is one.
async fn entry_of(f: &ConsoleFixture, key: &EntityKey) -> String {
    let member = compactor_producer::queue::Keys::member(key);
    f.client
        .queue()
        .dead_letters(10)
        .await
        .unwrap()
        .into_iter()
        .find(|d| d.member == member)
        .unwrap()
        .entry
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_retried_from_the_console_completes_and_one_purged_is_gone() {
    let f = ConsoleFixture::start(None).await;
    let mut c = ConsoleClient::new(&f.base);
    let entry = entry_of(&f, &f.dead).await;
    let page = c.get("/ui/dead-letters").await;
    let csrf = page.csrf().unwrap();

    // Without the CSRF token, or from another site: refused, not acted on.
    let refused = c.post("/ui/dead-letters/retry", &[("entry", &entry)]).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.text);
    let wrong = c
        .post(
            "/ui/dead-letters/retry",
            &[("csrf", "x"), ("entry", &entry)],
        )
        .await;
    assert_eq!(wrong.status, StatusCode::FORBIDDEN);
    let cross_site = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .post(format!("{}/ui/dead-letters/retry", f.base))
        .header("origin", "https://evil.example")
        .header(
            "cookie",
            format!("compactor_csrf={}", c.cookie("compactor_csrf").unwrap()),
        )
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!(
            "csrf={csrf}&entry={}",
            entry.replace('|', "%7C").replace(':', "%3A")
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(cross_site.status(), StatusCode::FORBIDDEN);
    assert!(f
        .client
        .queue()
        .dead_letter(&entry)
        .await
        .unwrap()
        .is_some());

    let retried = c
        .post(
            "/ui/dead-letters/retry",
            &[("csrf", &csrf), ("entry", &entry)],
        )
        .await;
    assert_eq!(retried.status, StatusCode::SEE_OTHER, "{}", retried.text);
    assert_eq!(retried.location(), Some("/ui/dead-letters?notice=retried"));
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
    let after = c.get("/ui/dead-letters?notice=retried").await;
    assert!(after.text.contains("Requested again"));
    assert!(!after.text.contains(f.dead.entity_id()), "{}", after.text);

    // Purge: the button opens a confirmation page; only its POST purges.
    let other = EntityKey::parse("chat", &compactor_e2e::unique_name("purged")).unwrap();
    f.dead_letter(&other).await;
    let entry = entry_of(&f, &other).await;
    let confirm = c
        .get(&format!(
            "/ui/dead-letters/purge?entry={}",
            entry.replace('|', "%7C").replace(':', "%3A")
        ))
        .await;
    assert_eq!(confirm.status, StatusCode::OK);
    assert!(confirm.text.contains("cannot be retried afterwards"));
    assert!(
        f.client
            .queue()
            .dead_letter(&entry)
            .await
            .unwrap()
            .is_some(),
        "GET purges nothing"
    );
    let purged = c
        .post(
            "/ui/dead-letters/purge",
            &[("csrf", &confirm.csrf().unwrap()), ("entry", &entry)],
        )
        .await;
    assert_eq!(purged.location(), Some("/ui/dead-letters?notice=purged"));
    assert!(f
        .client
        .queue()
        .dead_letter(&entry)
        .await
        .unwrap()
        .is_none());
    let again = c
        .post(
            "/ui/dead-letters/retry",
            &[("csrf", &csrf), ("entry", &entry)],
        )
        .await;
    assert_eq!(again.location(), Some("/ui/dead-letters?notice=gone"));
    f.stop().await;
}

/// Pause and resume from the console: pausing asks first (a confirmation
/// page), the POST needs the CSRF token, and the queue's own pause state
/// follows each action — the whole queue, then one domain; a domain that
/// does not parse pauses nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_and_a_domain_are_paused_and_resumed_from_the_console() {
    let f = ConsoleFixture::start(None).await;
    let mut c = ConsoleClient::new(&f.base);
    let queue = f.client.queue();
    let page = c.get("/ui/queue").await;
    assert!(
        page.text.contains("is <strong>running</strong>"),
        "{}",
        page.text
    );
    let csrf = page.csrf().unwrap();

    let refused = c.post("/ui/queue/pause", &[("domain", "")]).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert!(!queue.pause_state().await.unwrap().any_paused());

    let confirm = c.get("/ui/queue/pause").await;
    assert!(
        confirm.text.contains("Pause the whole queue?"),
        "{}",
        confirm.text
    );
    assert!(
        !queue.pause_state().await.unwrap().any_paused(),
        "a GET pauses nothing"
    );
    let paused = c
        .post("/ui/queue/pause", &[("csrf", &csrf), ("domain", "")])
        .await;
    assert_eq!(paused.status, StatusCode::SEE_OTHER, "{}", paused.text);
    assert_eq!(paused.location(), Some("/ui/queue?notice=paused"));
    assert!(queue.pause_state().await.unwrap().queue_paused);
    let page = c.get("/ui/queue?notice=paused").await;
    assert!(
        page.text.contains("is <strong>paused</strong>"),
        "{}",
        page.text
    );
    let resumed = c.post("/ui/queue/resume", &[("csrf", &csrf)]).await;
    assert_eq!(resumed.location(), Some("/ui/queue?notice=resumed"));
    assert!(!queue.pause_state().await.unwrap().any_paused());

    c.post("/ui/queue/pause", &[("csrf", &csrf), ("domain", "chat")])
        .await;
    let state = queue.pause_state().await.unwrap();
    assert!(!state.queue_paused);
    let domains: Vec<&str> = state
        .paused_domains
        .iter()
        .map(|d| d.domain.as_str())
        .collect();
    assert_eq!(domains, ["chat"]);
    let page = c.get("/ui/queue").await;
    assert!(page.text.contains("id=\"paused-domains\""), "{}", page.text);
    c.post("/ui/queue/resume", &[("csrf", &csrf), ("domain", "chat")])
        .await;
    assert!(!queue.pause_state().await.unwrap().any_paused());

    let invalid = c
        .post(
            "/ui/queue/pause",
            &[("csrf", &csrf), ("domain", "Not A Domain")],
        )
        .await;
    assert_eq!(invalid.location(), Some("/ui/queue?notice=invalid"));
    assert!(!queue.pause_state().await.unwrap().any_paused());
    f.stop().await;
}

/// Jobs from the console: a job waiting behind a paused queue is listed
/// under `waiting`, its page offers the cancel, the cancel asks first
/// (a confirmation page) and needs the CSRF token, and the job ends dead
/// with reason `cancelled`, listed under `dead`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_job_is_listed_and_cancelled_from_the_console() {
    use compactor_producer::queue::{JobView, PauseScope, CANCELLED_REASON};
    let f = ConsoleFixture::start(None).await;
    let mut c = ConsoleClient::new(&f.base);
    let queue = f.client.queue();
    queue.pause(&PauseScope::Queue).await.unwrap();
    let k = EntityKey::parse("chat", &compactor_e2e::unique_name("held")).unwrap();
    f.client
        .append_messages(&k, conversation(10))
        .await
        .unwrap();
    f.client.compact_now(&k, None).await.unwrap();
    let waiting = queue.list_jobs(JobView::Waiting, 10, None).await.unwrap();
    let job = waiting
        .jobs
        .iter()
        .find(|j| j.entity_id.as_deref() == Some(k.entity_id()))
        .expect("the job waits behind the pause")
        .job_id;

    let list = c.get("/ui/jobs").await;
    assert_eq!(list.status, StatusCode::OK);
    assert!(
        list.text.contains(&format!("href=\"/ui/jobs/{job}\"")),
        "{}",
        list.text
    );
    let page = c.get(&format!("/ui/jobs/{job}")).await;
    assert!(page.text.contains("cancel-dead"), "{}", page.text);
    let csrf = page.csrf().unwrap();
    let confirm = c.get(&format!("/ui/jobs/{job}/cancel?then=dead")).await;
    assert!(
        confirm.text.contains(&format!("Cancel job {job}?")),
        "{}",
        confirm.text
    );
    assert_eq!(
        queue.job(job).await.unwrap().unwrap().state,
        JobView::Waiting
    );

    let refused = c
        .post(&format!("/ui/jobs/{job}/cancel"), &[("then", "dead")])
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let cancelled = c
        .post(
            &format!("/ui/jobs/{job}/cancel"),
            &[("csrf", &csrf), ("then", "dead")],
        )
        .await;
    assert_eq!(
        cancelled.status,
        StatusCode::SEE_OTHER,
        "{}",
        cancelled.text
    );
    assert_eq!(
        cancelled.location(),
        Some(format!("/ui/jobs/{job}?notice=cancelled").as_str())
    );
    let dead = queue.job(job).await.unwrap().unwrap();
    assert_eq!(dead.state, JobView::Dead);
    assert!(
        dead.last_error
            .as_deref()
            .unwrap_or("")
            .starts_with(CANCELLED_REASON),
        "{dead:?}"
    );
    let again = c
        .post(
            &format!("/ui/jobs/{job}/cancel"),
            &[("csrf", &csrf), ("then", "dead")],
        )
        .await;
    assert_eq!(
        again.location(),
        Some(format!("/ui/jobs/{job}?notice=finished").as_str())
    );
    let dead_list = c.get("/ui/jobs?state=dead").await;
    assert!(
        dead_list.text.contains(&format!("href=\"/ui/jobs/{job}\"")),
        "{}",
        dead_list.text
    );
    queue.resume(&PauseScope::Queue).await.unwrap();
    f.stop().await;
}
