//! The future the sites' services return: [`ResponseFuture`].

/// Resolves to a site's response; ready at once (file system calls run
/// inline, like nginx without thread pools).
pub type ResponseFuture =
    std::future::Ready<Result<http::Response<celer::Body>, std::convert::Infallible>>;
