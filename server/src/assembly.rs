//! The assembly: one serving instance of an [`App`], standalone or in
//! front of an upstream. The choice is made here, once: standalone, the
//! local handlers write to the store and check passwords against it; in
//! front of an IMAP server the proxy wing's seams take their place
//! ([`crate::proxy::imap::seams`]); in front of a JMAP server the proxy
//! wing's routes answer instead of the local ones
//! ([`crate::proxy::jmap::edge`]). `cli::serve` and the tests build a
//! server only through [`assemble`].

use std::sync::Arc;

use crate::app::{App, ServeOptions};
use crate::http::{AppState, Router, local_routes, with_cors};
use crate::proxy::{Proxy, ProxyOptions};

/// A serving instance, ready for `crate::http::serve`.
pub struct Instance {
    /// Every route, CORS answered for `options.cors_origins`.
    pub router: Router,
    /// The instance's state (metrics, JMAP side), for in-process callers
    /// such as tests, benchmarks and the metrics listener.
    pub state: Arc<AppState>,
    /// In front of an upstream: the proxy wing, whose background work the
    /// caller starts.
    pub proxy: Option<Proxy>,
}

/// A serving instance of `app` with `options`, in front of `upstream` when
/// one is given.
pub fn assemble(app: &App, options: &ServeOptions, upstream: Option<&ProxyOptions>) -> Instance {
    let mut imap = None;
    let state = AppState::with(app, options, |jmap, auth| {
        if let Some(ProxyOptions::Imap(upstream)) = upstream {
            imap = Some(crate::proxy::imap::seams::install(
                upstream.clone(),
                app,
                jmap,
                auth,
            ));
        }
    });
    let (routes, state, proxy) = match (upstream, imap) {
        (Some(ProxyOptions::Jmap(upstream)), _) => {
            let proxy = crate::proxy::jmap::edge::JmapProxy::assemble(upstream, app, state);
            let routes = crate::proxy::jmap::edge::routes(proxy.clone());
            (routes, proxy.app.clone(), Some(Proxy::Jmap(proxy)))
        }
        (_, imap) => {
            let state = Arc::new(state);
            (local_routes(state.clone()), state, imap.map(Proxy::Imap))
        }
    };
    Instance {
        router: with_cors(routes, &options.cors_origins),
        state,
        proxy,
    }
}
