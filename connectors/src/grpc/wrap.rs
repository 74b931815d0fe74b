//! One shape for the layers around a gRPC service: the byte-budget admission, the unary
//! `ModelInfer` path and the access log each say only what they do to a call, given the service
//! inside ([`Around`]); [`Wrapped`] makes that a tower service tonic can serve, once for all of
//! them. tonic routes by a service's name, so a wrapped service keeps the name of the one inside.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tonic::body::Body;
use tonic::codegen::http;
use tonic::codegen::Service;
use tonic::server::NamedService;

/// A call's answer, as a layer returns it.
pub(crate) type Answer =
    Pin<Box<dyn Future<Output = Result<http::Response<Body>, Infallible>> + Send>>;

/// What a layer does to one call; `inner` is the service it wraps.
pub(crate) trait Around<S> {
    fn call(&mut self, inner: &mut S, request: http::Request<Body>) -> Answer;
}

/// The service `inner` with the layer `around` on every call.
#[derive(Debug, Clone)]
pub(crate) struct Wrapped<A, S> {
    around: A,
    inner: S,
}

impl<A, S> Wrapped<A, S> {
    pub(crate) fn around(around: A, inner: S) -> Wrapped<A, S> {
        Wrapped { around, inner }
    }
}

impl<A, S: NamedService> NamedService for Wrapped<A, S> {
    const NAME: &'static str = S::NAME;
}

impl<A, S> Service<http::Request<Body>> for Wrapped<A, S>
where
    A: Around<S>,
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Answer;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Answer {
        self.around.call(&mut self.inner, request)
    }
}
