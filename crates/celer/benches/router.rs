//! Route lookup at 10, 1,000 and 10,000 routes, beside matchit, plus the
//! cost of dispatching one request through an `App`.
//!
//! Run with `cargo bench -p celer --bench router`.

use std::convert::Infallible;
use std::hint::black_box;

use celer::{App, Body, Request};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_main};
use futures_util::FutureExt;
use tower::{Service, ServiceExt};

/// Five routes per resource: two static, two typed, one catch-all.
fn celer_rules(resource: usize) -> [String; 5] {
    [
        format!("/api/r{resource}"),
        format!("/api/r{resource}/search"),
        format!("/api/r{resource}/<int:id>"),
        format!("/api/r{resource}/<int:id>/items/<slug>"),
        format!("/files{resource}/<path:rest>"),
    ]
}

fn matchit_rules(resource: usize) -> [String; 5] {
    [
        format!("/api/r{resource}"),
        format!("/api/r{resource}/search"),
        format!("/api/r{resource}/{{id}}"),
        format!("/api/r{resource}/{{id}}/items/{{slug}}"),
        format!("/files{resource}/{{*rest}}"),
    ]
}

/// One request path for each kind of route of `resource`.
fn paths(resource: usize) -> [String; 5] {
    [
        format!("/api/r{resource}"),
        format!("/api/r{resource}/search"),
        format!("/api/r{resource}/42"),
        format!("/api/r{resource}/42/items/hello-world"),
        format!("/files{resource}/css/site.css"),
    ]
}

fn lookup(c: &mut Criterion) {
    let mut group = c.benchmark_group("lookup");
    for n_routes in [10, 1_000, 10_000] {
        let n_resources = n_routes / 5;
        let mut celer_router = celer::router::Router::new();
        let mut matchit_router = matchit::Router::new();
        for resource in 0..n_resources {
            for (idx, rule) in celer_rules(resource).iter().enumerate() {
                celer_router.insert(rule, idx).unwrap();
            }
            for (idx, rule) in matchit_rules(resource).iter().enumerate() {
                matchit_router.insert(rule, idx).unwrap();
            }
        }
        // Look up the last resource, the one inserted last.
        let paths = paths(n_resources - 1);
        for path in &paths {
            assert!(celer_router.at(path).is_some(), "{path}");
            assert!(matchit_router.at(path).is_ok(), "{path}");
        }
        group.throughput(Throughput::Elements(paths.len() as u64));
        group.bench_with_input(BenchmarkId::new("celer", n_routes), &paths, |b, paths| {
            b.iter(|| {
                for path in paths {
                    let m = celer_router.at(black_box(path)).unwrap();
                    black_box((m.value(), m.params().get("id")));
                }
            })
        });
        group.bench_with_input(BenchmarkId::new("matchit", n_routes), &paths, |b, paths| {
            b.iter(|| {
                for path in paths {
                    let m = matchit_router.at(black_box(path)).unwrap();
                    black_box((m.value, m.params.get("id")));
                }
            })
        });
    }
    group.finish();
}

/// One GET /plaintext through `App` versus a bare `service_fn`.
fn dispatch(c: &mut Criterion) {
    let mut group = c.benchmark_group("dispatch");
    let mut app = App::new();
    app.get("/plaintext", |_req: Request| async { "Hello, World!" });
    app.get("/users/<int:id>", |req: Request| async move {
        celer::response::text(req.param_str("id").unwrap_or_default().into_owned())
    });
    let bare = tower::service_fn(|_req: http::Request<Body>| async {
        let mut res = http::Response::new(Body::from("Hello, World!"));
        res.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        Ok::<_, Infallible>(res)
    });
    let request = |path: &'static str| http::Request::get(path).body(Body::empty()).unwrap();
    group.bench_function("bare/plaintext", |b| {
        let mut svc = bare;
        b.iter(|| black_box(svc.call(request("/plaintext")).now_or_never()))
    });
    group.bench_function("app/plaintext", |b| {
        let mut svc = app.clone();
        b.iter(|| black_box(svc.call(request("/plaintext")).now_or_never()))
    });
    group.bench_function("app/typed", |b| {
        let mut svc = app.clone();
        b.iter(|| black_box(svc.call(request("/users/42")).now_or_never()))
    });
    group.bench_function("app/not_found", |b| {
        b.iter(|| black_box(app.clone().oneshot(request("/nope")).now_or_never()))
    });
    group.finish();
}

mod group {
    //! The criterion group; a module so the generated function needs no docs.
    #![allow(missing_docs)]
    criterion::criterion_group!(benches, super::lookup, super::dispatch);
}

criterion_main!(group::benches);
