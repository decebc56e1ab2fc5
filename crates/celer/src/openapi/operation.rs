//! What a route says about itself: summary, parameters, request body and
//! responses, with their schemas.

use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator};

/// Makes a schema for a type, adding the types it names to the generator.
pub(crate) type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

fn subschema<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

/// A schema as an operation holds it: derived from a type when the
/// document is built, or given as it is.
#[derive(Clone)]
pub(crate) enum SchemaSource {
    Type(SchemaFn),
    Given(Schema),
}

/// Where a parameter travels (OpenAPI 3.1 §4.8.12.1, `in`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Location {
    Query,
    Header,
    Cookie,
}

#[derive(Clone)]
pub(crate) struct Param {
    pub(crate) name: String,
    pub(crate) location: Location,
    pub(crate) required: bool,
    pub(crate) description: Option<String>,
    pub(crate) schema: SchemaSource,
}

#[derive(Clone)]
pub(crate) struct Content {
    pub(crate) media_type: String,
    pub(crate) schema: Option<SchemaSource>,
}

#[derive(Clone)]
pub(crate) struct RequestBody {
    pub(crate) description: Option<String>,
    pub(crate) required: bool,
    pub(crate) content: Vec<Content>,
}

#[derive(Clone)]
pub(crate) struct ResponseHeader {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) schema: SchemaSource,
}

#[derive(Clone)]
pub(crate) struct ResponseDoc {
    /// `None` is the `default` response.
    pub(crate) status: Option<u16>,
    pub(crate) description: String,
    pub(crate) content: Vec<Content>,
    pub(crate) headers: Vec<ResponseHeader>,
}

/// The description of one route, for the OpenAPI document: built with
/// [`RouteBuilder::describe`](crate::app::RouteBuilder::describe).
///
/// Schemas come from types that implement [`JsonSchema`] (derive it with
/// `#[derive(schemars::JsonSchema)]`); request bodies and query parameters
/// are described as the types deserialize, response bodies as they
/// serialize. The path parameters come from the route's rule and need no
/// description.
///
/// ```
/// use celer::openapi::{JsonSchema, OpenApi};
/// use celer::Request;
///
/// #[derive(serde::Deserialize, JsonSchema)]
/// struct NewNote { text: String }
/// #[derive(serde::Serialize, JsonSchema)]
/// struct Note { id: u64, text: String }
///
/// let mut app = celer::App::new();
/// app.post("/notes", |_req: Request| async { http::StatusCode::CREATED })
///     .name("create_note")
///     .describe(|op| {
///         op.summary("Creates a note")
///             .request_json::<NewNote>()
///             .response_json::<Note>(201, "The note")
///             .response(422, "The text is empty")
///     });
/// let doc = OpenApi::new("Notes", "1.0").document(&app);
/// let post = &doc["paths"]["/notes"]["post"];
/// assert_eq!(post["operationId"], "create_note");
/// assert_eq!(
///     post["requestBody"]["content"]["application/json"]["schema"]["$ref"],
///     "#/components/schemas/NewNote"
/// );
/// ```
#[derive(Clone, Default)]
pub struct Operation {
    pub(crate) operation_id: Option<String>,
    pub(crate) summary: Option<String>,
    pub(crate) description: Option<String>,
    pub(crate) tags: Vec<String>,
    pub(crate) deprecated: bool,
    pub(crate) hidden: bool,
    pub(crate) params: Vec<Param>,
    /// Types whose properties are query parameters.
    pub(crate) query_types: Vec<SchemaFn>,
    pub(crate) request: Option<RequestBody>,
    pub(crate) responses: Vec<ResponseDoc>,
}

impl Operation {
    /// An empty description.
    pub fn new() -> Self {
        Operation::default()
    }

    /// Sets the `operationId`; by default it is the route's name (with
    /// `_get`, `_post`... when the route has several methods).
    pub fn operation_id(mut self, id: impl Into<String>) -> Self {
        self.operation_id = Some(id.into());
        self
    }

    /// A one-line summary.
    pub fn summary(mut self, text: impl Into<String>) -> Self {
        self.summary = Some(text.into());
        self
    }

    /// A longer description (CommonMark).
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(text.into());
        self
    }

    /// Adds a tag, which groups operations in the docs page.
    pub fn tag(mut self, tag: impl Into<String>) -> Self {
        self.tags.push(tag.into());
        self
    }

    /// Marks the operation as deprecated.
    pub fn deprecated(mut self) -> Self {
        self.deprecated = true;
        self
    }

    /// Leaves the route out of the document.
    pub fn hidden(mut self) -> Self {
        self.hidden = true;
        self
    }

    /// Describes the query string by a type (as it deserializes, e.g. with
    /// [`Request::query`](crate::Request::query)): each property of its
    /// schema is one query parameter, required when the schema requires it.
    pub fn query<T: JsonSchema>(mut self) -> Self {
        self.query_types.push(subschema::<T>);
        self
    }

    /// Adds one query parameter of type `T`.
    pub fn query_param<T: JsonSchema>(
        self,
        name: impl Into<String>,
        required: bool,
        description: impl Into<String>,
    ) -> Self {
        self.param(Location::Query, name, required, description, subschema::<T>)
    }

    /// Adds a request header of type `T` (usually `String`).
    pub fn header<T: JsonSchema>(
        self,
        name: impl Into<String>,
        required: bool,
        description: impl Into<String>,
    ) -> Self {
        self.param(
            Location::Header,
            name,
            required,
            description,
            subschema::<T>,
        )
    }

    /// Adds a request header with a schema given as it is, e.g. with
    /// [`json_schema!`](crate::openapi::json_schema) for a pattern or a
    /// length.
    pub fn header_schema(
        mut self,
        name: impl Into<String>,
        required: bool,
        description: impl Into<String>,
        schema: Schema,
    ) -> Self {
        self.params.push(Param {
            name: name.into(),
            location: Location::Header,
            required,
            description: Some(description.into()),
            schema: SchemaSource::Given(schema),
        });
        self
    }

    /// Adds a cookie of type `T`.
    pub fn cookie<T: JsonSchema>(
        self,
        name: impl Into<String>,
        required: bool,
        description: impl Into<String>,
    ) -> Self {
        self.param(
            Location::Cookie,
            name,
            required,
            description,
            subschema::<T>,
        )
    }

    fn param(
        mut self,
        location: Location,
        name: impl Into<String>,
        required: bool,
        description: impl Into<String>,
        schema: SchemaFn,
    ) -> Self {
        self.params.push(Param {
            name: name.into(),
            location,
            required,
            description: Some(description.into()),
            schema: SchemaSource::Type(schema),
        });
        self
    }

    /// A required `application/json` request body of type `T`.
    pub fn request_json<T: JsonSchema>(self) -> Self {
        self.request_content("application/json", Some(SchemaSource::Type(subschema::<T>)))
    }

    /// A required request body of `media_type` with the schema given, or
    /// any content when `None` (e.g. `application/octet-stream`). Called
    /// again, it adds another media type to the same body.
    pub fn request_body(self, media_type: impl Into<String>, schema: Option<Schema>) -> Self {
        self.request_content(media_type, schema.map(SchemaSource::Given))
    }

    fn request_content(
        mut self,
        media_type: impl Into<String>,
        schema: Option<SchemaSource>,
    ) -> Self {
        let body = self.request.get_or_insert_with(|| RequestBody {
            description: None,
            required: true,
            content: Vec::new(),
        });
        body.content.push(Content {
            media_type: media_type.into(),
            schema,
        });
        self
    }

    /// Makes the request body optional.
    pub fn request_optional(mut self) -> Self {
        if let Some(body) = &mut self.request {
            body.required = false;
        }
        self
    }

    /// A response without a body (or whose body is not described).
    pub fn response(mut self, status: u16, description: impl Into<String>) -> Self {
        self.response_entry(Some(status), description.into());
        self
    }

    /// A response with an `application/json` body of type `T`.
    pub fn response_json<T: JsonSchema>(self, status: u16, description: impl Into<String>) -> Self {
        self.response_content(
            Some(status),
            description.into(),
            "application/json",
            Some(SchemaSource::Type(subschema::<T>)),
        )
    }

    /// A response with a body of `media_type`: the schema given, or any
    /// content when `None` (e.g. `text/event-stream`, `image/png`).
    pub fn response_body(
        self,
        status: u16,
        description: impl Into<String>,
        media_type: impl Into<String>,
        schema: Option<Schema>,
    ) -> Self {
        self.response_content(
            Some(status),
            description.into(),
            media_type,
            schema.map(SchemaSource::Given),
        )
    }

    /// The `default` response: what every status not listed answers, with
    /// an `application/json` body of type `T`.
    pub fn default_response_json<T: JsonSchema>(self, description: impl Into<String>) -> Self {
        self.response_content(
            None,
            description.into(),
            "application/json",
            Some(SchemaSource::Type(subschema::<T>)),
        )
    }

    /// Adds a header to the response of `status` (declared before or
    /// after), of type `T`.
    pub fn response_header<T: JsonSchema>(
        mut self,
        status: u16,
        name: impl Into<String>,
        description: impl Into<String>,
    ) -> Self {
        let entry = self.response_entry(Some(status), String::new());
        entry.headers.push(ResponseHeader {
            name: name.into(),
            description: description.into(),
            schema: SchemaSource::Type(subschema::<T>),
        });
        self
    }

    fn response_content(
        mut self,
        status: Option<u16>,
        description: String,
        media_type: impl Into<String>,
        schema: Option<SchemaSource>,
    ) -> Self {
        let entry = self.response_entry(status, description);
        entry.content.push(Content {
            media_type: media_type.into(),
            schema,
        });
        self
    }

    /// The response of `status`, made when missing; a non-empty
    /// description replaces the one it had.
    fn response_entry(&mut self, status: Option<u16>, description: String) -> &mut ResponseDoc {
        let idx = match self.responses.iter().position(|r| r.status == status) {
            Some(idx) => idx,
            None => {
                self.responses.push(ResponseDoc {
                    status,
                    description: String::new(),
                    content: Vec::new(),
                    headers: Vec::new(),
                });
                self.responses.len() - 1
            }
        };
        let entry = &mut self.responses[idx];
        if !description.is_empty() {
            entry.description = description;
        }
        entry
    }
}

impl fmt::Debug for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Operation")
            .field("operation_id", &self.operation_id)
            .field("summary", &self.summary)
            .field("hidden", &self.hidden)
            .field("params", &self.params.len())
            .field("responses", &self.responses.len())
            .finish_non_exhaustive()
    }
}
