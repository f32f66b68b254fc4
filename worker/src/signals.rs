//! Process signals as a shutdown future.

/// Resolves on the first SIGTERM or SIGINT (Ctrl-C). If a handler cannot
/// be installed, the error is logged and only the other signal counts.
pub async fn terminate() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => tracing::info!("SIGTERM received"),
                    r = tokio::signal::ctrl_c() => on_ctrl_c(r).await,
                }
            }
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM; only SIGINT stops the worker");
                on_ctrl_c(tokio::signal::ctrl_c().await).await;
            }
        }
    }
    #[cfg(not(unix))]
    on_ctrl_c(tokio::signal::ctrl_c().await).await;
}

async fn on_ctrl_c(result: std::io::Result<()>) {
    match result {
        Ok(()) => tracing::info!("SIGINT received"),
        Err(error) => {
            tracing::error!(%error, "cannot listen for SIGINT");
            // Never resolve: stopping on a broken signal handler would
            // shut the worker down for no reason.
            std::future::pending::<()>().await;
        }
    }
}
