//! A small W3C WebDriver client over reqwest, for the console's browser
//! tests: Debian's `chromium` driven headless by its `chromedriver`
//! (installed by `tests/browser/install`). The handful of commands the
//! tests use — navigate, read the page, find and click elements, type,
//! answer a confirm dialog, resize, screenshot — are plain JSON over HTTP,
//! so this is a few functions rather than a crate (and its dependency
//! tree) in every build of the tests.
//!
//! Every command has a timeout ([`COMMAND_TIMEOUT`]); chromedriver is
//! started on a free port and stopped (with its browser) on drop.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{json, Value};

/// Longest one WebDriver command may take.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// The W3C key of an element reference.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// The first of `names` found on `PATH` (or in `/usr/bin`).
fn find_binary(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path)
        .chain([
            PathBuf::from("/usr/bin"),
            PathBuf::from("/usr/lib/chromium"),
        ])
        .collect();
    names
        .iter()
        .flat_map(|name| dirs.iter().map(move |d| d.join(name)))
        .find(|p| p.is_file())
}

/// A running chromedriver and one headless chromium session.
pub struct Browser {
    driver: Child,
    http: reqwest::Client,
    /// `http://127.0.0.1:<port>/session/<id>`.
    session: String,
}

/// An element of the page.
#[derive(Debug, Clone)]
pub struct Element(String);

impl Browser {
    /// Starts chromedriver and a headless chromium of `width` × `height`.
    /// Panics, naming the install script, when either is missing.
    pub async fn start(width: u32, height: u32) -> Browser {
        Browser::start_with(width, height, &[]).await
    }

    /// [`Browser::start`] with more chromium flags (`--force-dark-mode`:
    /// pages see `prefers-color-scheme: dark`).
    pub async fn start_with(width: u32, height: u32, flags: &[&str]) -> Browser {
        let driver_bin = find_binary(&["chromedriver"]).unwrap_or_else(|| {
            panic!("chromedriver is not installed: run tests/browser/install (apt-get install chromium chromium-driver)")
        });
        let chromium = find_binary(&["chromium", "chromium-browser"]).unwrap_or_else(|| {
            panic!("chromium is not installed: run tests/browser/install (apt-get install chromium chromium-driver)")
        });
        let port = compactor_testkit::free_port();
        let driver = Command::new(&driver_bin)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{} starts: {e}", driver_bin.display()));
        let http = reqwest::Client::builder()
            .timeout(COMMAND_TIMEOUT)
            .build()
            .unwrap();
        let base = format!("http://127.0.0.1:{port}");
        crate::eventually("chromedriver answers", Duration::from_secs(20), || async {
            http.get(format!("{base}/status"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
        })
        .await;
        let mut args = vec![
            "--headless=new".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            "--hide-scrollbars".to_owned(),
            format!("--window-size={width},{height}"),
        ];
        args.extend(flags.iter().map(|f| (*f).to_owned()));
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium.to_string_lossy(),
                "args": args,
            },
        }}});
        let created: Value = http
            .post(format!("{base}/session"))
            .json(&capabilities)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let id = created["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {created}"))
            .to_owned();
        Browser {
            driver,
            http,
            session: format!("{base}/session/{id}"),
        }
    }

    /// One command: its `value`, or a panic with WebDriver's error.
    async fn command(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self.http.request(method, format!("{}{path}", self.session));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let reply: Value = response.json().await.unwrap();
        assert!(status.is_success(), "WebDriver {path}: {status} {reply}");
        reply["value"].clone()
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        self.command(reqwest::Method::POST, path, Some(body)).await
    }

    async fn get(&self, path: &str) -> Value {
        self.command(reqwest::Method::GET, path, None).await
    }

    /// Opens `url` (and waits for the page to load).
    pub async fn goto(&self, url: &str) {
        self.post("/url", json!({ "url": url })).await;
    }

    pub async fn current_url(&self) -> String {
        self.get("/url")
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The page's HTML as the browser has it now.
    pub async fn source(&self) -> String {
        self.get("/source")
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The first element `css` selects; panics if there is none.
    pub async fn find(&self, css: &str) -> Element {
        let value = self
            .post("/element", json!({"using": "css selector", "value": css}))
            .await;
        Element(
            value[ELEMENT_KEY]
                .as_str()
                .unwrap_or_else(|| panic!("no element {css:?}: {value}"))
                .to_owned(),
        )
    }

    /// How many elements `css` selects.
    pub async fn count(&self, css: &str) -> usize {
        self.post("/elements", json!({"using": "css selector", "value": css}))
            .await
            .as_array()
            .map_or(0, Vec::len)
    }

    pub async fn click(&self, element: &Element) {
        self.post(&format!("/element/{}/click", element.0), json!({}))
            .await;
    }

    pub async fn type_into(&self, element: &Element, text: &str) {
        self.post(
            &format!("/element/{}/value", element.0),
            json!({ "text": text }),
        )
        .await;
    }

    /// A DOM property of `element` (`open` of a `<details>`, …).
    pub async fn property(&self, element: &Element, name: &str) -> Value {
        self.get(&format!("/element/{}/property/{name}", element.0))
            .await
    }

    /// The value of a JavaScript expression (`return …;`) in the page.
    pub async fn eval(&self, script: &str) -> Value {
        self.post("/execute/sync", json!({"script": script, "args": []}))
            .await
    }

    /// The text of the open alert or confirm dialog.
    pub async fn dialog_text(&self) -> String {
        self.get("/alert/text")
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Answers the open confirm dialog: OK (`accept`) or Cancel.
    pub async fn answer_dialog(&self, accept: bool) {
        let path = if accept {
            "/alert/accept"
        } else {
            "/alert/dismiss"
        };
        self.post(path, json!({})).await;
    }

    /// Resizes the window.
    pub async fn resize(&self, width: u32, height: u32) {
        self.post("/window/rect", json!({"width": width, "height": height}))
            .await;
    }

    /// Saves a PNG of the viewport to `path` (creating its folder).
    pub async fn screenshot(&self, path: &Path) {
        let png = self.get("/screenshot").await;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().unwrap_or_default())
            .unwrap();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(path, bytes).unwrap();
    }

    /// Ends the session and stops chromedriver.
    pub async fn quit(mut self) {
        let _ = self.http.delete(&self.session).send().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // A test that failed before `quit`: no driver left behind.
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
