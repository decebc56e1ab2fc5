// A handler returning `Result<String, std::io::Error>`: the error is not a
// response.
//~ expect: is not a celer handler
//~ expect: `std::io::Error` cannot be a response: it does not implement `IntoResponse`
//~ expect: `celer::Error` takes any `std::error::Error` with `?`

async fn read(_req: celer::Request) -> Result<String, std::io::Error> {
    std::fs::read_to_string("/etc/hostname")
}

fn main() {
    let mut app = celer::App::new();
    app.get("/host", read);
    app.get("/host", celer::debug_handler(read));
}
