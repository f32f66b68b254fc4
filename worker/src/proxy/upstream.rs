//! Forwarding to the model provider: the request as the client sent it
//! (every header but the hop-by-hop ones and the proxy's own), the answer
//! back as the provider sent it.

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, Response, StatusCode};
use futures::future::BoxFuture;

/// Headers that belong to one connection, not to the request (RFC 9110
/// §7.6.1), and those the forwarded request sets itself.
const NOT_FORWARDED: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    // The answer is read to be stored: it must come uncompressed.
    "accept-encoding",
];

/// The proxy's own headers, never sent on.
pub(super) const OWN_PREFIX: &str = "x-compactor-";

/// The headers to send on: the client's, less [`NOT_FORWARDED`] and the
/// proxy's own.
pub(super) fn request_headers(from: &HeaderMap) -> HeaderMap {
    from.iter()
        .filter(|(name, _)| {
            let name = name.as_str();
            !NOT_FORWARDED.contains(&name) && !name.starts_with(OWN_PREFIX)
        })
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect()
}

/// The headers of an answer to pass back (its length is set again for
/// what is sent).
fn response_headers(from: &HeaderMap) -> HeaderMap {
    from.iter()
        .filter(|(name, _)| !NOT_FORWARDED.contains(&name.as_str()))
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect()
}

/// Why the upstream could not be asked.
#[derive(Debug, thiserror::Error)]
#[error("upstream {url}: {source}")]
pub(super) struct UpstreamError {
    pub(super) url: String,
    #[source]
    pub(super) source: reqwest::Error,
}

/// Sends a request on to `url`.
pub(super) async fn send(
    http: &reqwest::Client,
    method: Method,
    url: &str,
    headers: HeaderMap,
    body: Bytes,
) -> Result<reqwest::Response, UpstreamError> {
    http.request(method, url)
        .headers(headers)
        .body(body)
        .send()
        .await
        .map_err(|source| UpstreamError {
            url: url.to_owned(),
            source,
        })
}

/// An answer read whole.
pub(super) struct Whole {
    pub(super) status: StatusCode,
    pub(super) headers: HeaderMap,
    pub(super) body: Bytes,
}

impl Whole {
    pub(super) async fn read(response: reqwest::Response) -> Result<Whole, UpstreamError> {
        let status = response.status();
        let headers = response_headers(response.headers());
        let url = response.url().to_string();
        let body = response
            .bytes()
            .await
            .map_err(|source| UpstreamError { url, source })?;
        Ok(Whole {
            status,
            headers,
            body,
        })
    }

    pub(super) fn into_response(self) -> Response<Body> {
        let mut response = Response::new(Body::from(self.body));
        *response.status_mut() = self.status;
        *response.headers_mut() = self.headers;
        response
    }
}

/// Whether an answer is a stream of server-sent events.
pub(super) fn is_event_stream(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// What watches a streamed answer pass: each chunk as it goes by, then
/// its end.
pub(super) trait Tee: Send + 'static {
    /// Reads a chunk before it is passed on; `true` when the answer is
    /// complete with it (its closing event), so that [`Tee::end`] runs
    /// before the client can see the end and send its next request.
    fn chunk(&mut self, chunk: &Bytes) -> bool;
    /// The answer ended; `whole`: completely, as the client receives it
    /// (cleanly ended, and the client still there).
    fn end(self, whole: bool) -> BoxFuture<'static, ()>;
}

/// Chunks in flight between the upstream and a slow client.
const STREAM_BUFFER: usize = 16;

/// Passes a streamed answer on chunk by chunk, as it arrives. A task reads
/// the upstream, so the tee sees the end whatever the client does; a
/// client that goes away ends the reading.
pub(super) fn pass_through<T: Tee>(mut response: reqwest::Response, tee: T) -> Response<Body> {
    let status = response.status();
    let headers = response_headers(response.headers());
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(STREAM_BUFFER);
    tokio::spawn(async move {
        let mut tee = Some(tee);
        let whole = loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if let Some(watching) = tee.as_mut() {
                        if watching.chunk(&chunk) {
                            if let Some(done) = tee.take() {
                                done.end(!tx.is_closed()).await;
                            }
                        }
                    }
                    if tx.send(Ok(chunk)).await.is_err() {
                        break false;
                    }
                }
                Ok(None) => break true,
                Err(error) => {
                    tracing::warn!(%error, "the upstream's stream broke");
                    let _ = tx.send(Err(std::io::Error::other(error))).await;
                    break false;
                }
            }
        };
        if let Some(tee) = tee {
            tee.end(whole).await;
        }
    });
    let body = futures::stream::unfold(rx, |mut rx| async move {
        let item = rx.recv().await?;
        Some((item, rx))
    });
    let mut response = Response::new(Body::from_stream(body));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}
