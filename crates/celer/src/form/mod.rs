//! `application/x-www-form-urlencoded` bodies into typed structs, under a
//! byte limit and a field count limit.
//!
//! [`Form`] is the extractor with the default limits; [`FormLimits::read`]
//! takes others. The byte limit is the smaller of [`FormLimits::bytes`] and
//! the route's body limit.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use celer::form::{Form, FormLimits};
//! use celer::{App, Error, Request};
//!
//! #[derive(serde::Deserialize)]
//! struct Comment { author: String, text: String }
//!
//! async fn comment(mut req: Request) -> Result<String, Error> {
//!     let Form(c): Form<Comment> = req.extract().await?;
//!     Ok(format!("{} says {}", c.author, c.text))
//! }
//!
//! async fn tiny(mut req: Request) -> Result<String, Error> {
//!     let limits = FormLimits { fields: 1, ..Default::default() };
//!     let c: Comment = limits.read(&mut req).await?;
//!     Ok(c.text)
//! }
//!
//! let mut app = App::new();
//! app.post("/comment", comment);
//! app.post("/tiny", tiny);
//! let client = celer::test::TestClient::new(app);
//! let form = "application/x-www-form-urlencoded";
//! let res = client.post("/comment").header("content-type", form)
//!     .body("author=ann&text=hi%20there").send().await;
//! assert_eq!(res.text(), "ann says hi there");
//! let res = client.post("/tiny").header("content-type", form)
//!     .body("author=ann&text=hi").send().await;
//! assert_eq!(res.status(), 413);
//! # });
//! ```

use http::StatusCode;
use serde::de::DeserializeOwned;

use crate::Request;
use crate::extract::FromRequest;
use crate::extract::rejection::{BytesRejection, kind_rejection};

/// The default limit on a form body: 64 KiB (bytes). A route's smaller
/// body limit wins.
pub const MAX_FORM_BYTES: usize = 64 * 1024;

/// The default limit on the number of fields (`name=value` pairs) of a
/// form: 256.
pub const MAX_FORM_FIELDS: usize = 256;

/// The limits a form is read under.
///
/// ```
/// let limits = celer::form::FormLimits::default();
/// assert_eq!(limits.fields, celer::form::MAX_FORM_FIELDS);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FormLimits {
    /// Bytes of the body ([`MAX_FORM_BYTES`], and at most the route's
    /// body limit); past it: 413.
    pub bytes: usize,
    /// `name=value` pairs ([`MAX_FORM_FIELDS`]); past it: 413.
    pub fields: usize,
}

impl Default for FormLimits {
    fn default() -> Self {
        FormLimits {
            bytes: MAX_FORM_BYTES,
            fields: MAX_FORM_FIELDS,
        }
    }
}

impl FormLimits {
    /// Reads the body of `req` as a urlencoded form into `T`.
    pub async fn read<T: DeserializeOwned>(&self, req: &mut Request) -> Result<T, FormError> {
        let content_type = req
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let essence = content_type.split(';').next().unwrap_or("").trim();
        if !essence.eq_ignore_ascii_case("application/x-www-form-urlencoded") {
            return Err(FormError::new(Kind::NotForm));
        }
        let limit = self.bytes.min(req.body_limit());
        req.set_body_limit(limit);
        let body = req.bytes().await.map_err(|err| match err {
            BytesRejection::BodyTooLarge(_) => FormError::new(Kind::TooLarge),
            other => FormError::with_source(Kind::ReadFailed, other),
        })?;
        // WHATWG URL "application/x-www-form-urlencoded parsing": the
        // body splits on `&`, empty sequences are skipped.
        let fields = body.split(|&b| b == b'&').filter(|s| !s.is_empty()).count();
        if fields > self.fields {
            return Err(FormError::new(Kind::TooManyFields));
        }
        serde_urlencoded::from_bytes(&body).map_err(|err| FormError::with_source(Kind::Data, err))
    }
}

/// A urlencoded form read under the default [`FormLimits`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Form<T>(pub T);

impl<T: DeserializeOwned + Send> FromRequest for Form<T> {
    type Rejection = FormError;

    async fn from_request(req: &mut Request) -> Result<Self, Self::Rejection> {
        FormLimits::default().read(req).await.map(Form)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    NotForm,
    TooLarge,
    TooManyFields,
    Data,
    ReadFailed,
}

kind_rejection!(
    /// Why a form was refused: `415` when the body is not a urlencoded form,
    /// `413` past a limit, `422` when it does not fit the type, `400` when it
    /// could not be read.
    FormError,
    Kind,
    "form refused"
);

impl FormError {
    /// The status this error is answered with.
    pub fn status(&self) -> StatusCode {
        match self.kind {
            Kind::NotForm => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Kind::TooLarge | Kind::TooManyFields => StatusCode::PAYLOAD_TOO_LARGE,
            Kind::Data => StatusCode::UNPROCESSABLE_ENTITY,
            Kind::ReadFailed => StatusCode::BAD_REQUEST,
        }
    }

    /// The short body this error is answered with.
    pub fn body_text(&self) -> &'static str {
        match self.kind {
            Kind::NotForm => "expected content-type: application/x-www-form-urlencoded",
            Kind::TooLarge => "payload too large",
            Kind::TooManyFields => "too many form fields",
            Kind::Data => "form does not match the expected shape",
            Kind::ReadFailed => "failed to read the request body",
        }
    }
}
