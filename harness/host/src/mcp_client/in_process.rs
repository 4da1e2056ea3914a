//! HTTP under rmcp for a tool server in this very process: each request goes to the server's service in memory.
//!
//! The same requests, headers and bodies as over a socket, answered by the
//! same service stack (see `delegation_observers::in_process`), read as
//! rmcp's own reqwest client reads them; what is saved is two HTTP stacks,
//! loopback TCP and the wake-ups between them. Only a tool server that
//! registered itself in this process is reached this way.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use delegation_observers::in_process::{Body, InProcessError, InProcessService};
use futures_util::StreamExt as _;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HOST, HeaderName, HeaderValue, RETRY_AFTER};
use rmcp::model::{ClientJsonRpcMessage, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::common::client_side_sse::BoxedSseResponse;
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_LAST_EVENT_ID, HEADER_SESSION_ID, JSON_MIME_TYPE,
};
use rmcp::transport::streamable_http_client::{
    HttpStatusError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};

type InProcessResult<T> = Result<T, StreamableHttpError<InProcessError>>;

/// The largest answer read into memory whole: far above any listing a scenario serves.
const MAX_BODY: usize = 16 * 1024 * 1024;

/// A tool server's service in this process, as rmcp's HTTP client.
#[derive(Clone, Debug)]
pub(super) struct InProcessHttp {
    pub(super) service: InProcessService,
}

fn header(value: &str) -> InProcessResult<HeaderValue> {
    HeaderValue::from_str(value).map_err(|e| {
        StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!(
            "header value {value:?}: {e}"
        )))
    })
}

/// `Accept` as rmcp's client sends it on a POST and on the GET stream: SSE or JSON.
fn accept_either() -> InProcessResult<HeaderValue> {
    header(&[EVENT_STREAM_MIME_TYPE, JSON_MIME_TYPE].join(", "))
}

/// The essence of a `Content-Type` (no parameters), lower-cased.
fn media_type(response: &http::Response<Body>) -> Option<String> {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|ct| {
            ct.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
}

async fn body_text(body: Body) -> String {
    match axum_body_bytes(body).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(_) => "<failed to read response body>".to_string(),
    }
}

async fn axum_body_bytes(body: Body) -> Result<Vec<u8>, String> {
    let mut stream = body.into_data_stream();
    let mut bytes = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| e.to_string())?;
        if bytes.len() + chunk.len() > MAX_BODY {
            return Err(format!("answer over {MAX_BODY} bytes"));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

fn sse(body: Body) -> BoxedSseResponse {
    sse_stream::SseStream::from_bytes_stream(body.into_data_stream()).boxed()
}

impl InProcessHttp {
    /// A request as rmcp's reqwest client builds it.
    fn request(
        method: http::Method,
        uri: &str,
        session_id: Option<&str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> InProcessResult<http::request::Builder> {
        let parsed: http::Uri = uri.parse().map_err(|e| {
            StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!("URL {uri}: {e}")))
        })?;
        let mut request = http::Request::builder().method(method).uri(parsed.clone());
        if let Some(authority) = parsed.authority() {
            request = request.header(HOST, header(authority.as_str())?);
        }
        if let Some(session_id) = session_id {
            request = request.header(HEADER_SESSION_ID, header(session_id)?);
        }
        if let Some(token) = auth_header {
            request = request.header(
                reqwest::header::AUTHORIZATION,
                header(&format!("Bearer {token}"))?,
            );
        }
        for (name, value) in custom_headers {
            request = request.header(name, value);
        }
        Ok(request)
    }

    async fn send(
        &self,
        request: http::request::Builder,
        body: Body,
    ) -> InProcessResult<http::Response<Body>> {
        let request = request.body(body).map_err(|e| {
            StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!(
                "building a request: {e}"
            )))
        })?;
        self.service
            .send(request)
            .await
            .map_err(StreamableHttpError::Client)
    }

    /// A failed status as rmcp's reqwest client reports it.
    async fn status_error<T>(response: http::Response<Body>) -> InProcessResult<T> {
        let status = response.status();
        if status == http::StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
            let retry_after = response
                .headers()
                .get(RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            return Err(HttpStatusError::new(status.as_u16(), retry_after).into());
        }
        let body = body_text(response.into_body()).await;
        Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
            format!("HTTP {status}: {body}"),
        )))
    }
}

impl StreamableHttpClient for InProcessHttp {
    type Error = InProcessError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> InProcessResult<StreamableHttpPostResponse> {
        let session_was_attached = session_id.is_some();
        let request = Self::request(
            http::Method::POST,
            &uri,
            session_id.as_deref(),
            auth_header,
            custom_headers,
        )?
        .header(ACCEPT, accept_either()?)
        .header(CONTENT_TYPE, header(JSON_MIME_TYPE)?);
        let body = serde_json::to_vec(&message)?;
        let response = self.send(request, Body::from(body)).await?;
        let status = response.status();
        if matches!(
            status,
            http::StatusCode::ACCEPTED | http::StatusCode::NO_CONTENT
        ) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == http::StatusCode::NOT_FOUND && session_was_attached {
            return Err(StreamableHttpError::SessionExpired);
        }
        let session = response
            .headers()
            .get(HEADER_SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let awaits_no_response = !matches!(message, ClientJsonRpcMessage::Request(_));
        let media = media_type(&response);
        let is_json = media.as_deref() == Some(JSON_MIME_TYPE);
        if !status.is_success() {
            // A JSON-RPC error in a failed answer is the server's answer to the request.
            if is_json && status != http::StatusCode::TOO_MANY_REQUESTS {
                let (parts, body) = response.into_parts();
                let bytes = axum_body_bytes(body).await.unwrap_or_default();
                if let Ok(error @ JsonRpcMessage::Error(_)) =
                    serde_json::from_slice::<ServerJsonRpcMessage>(&bytes)
                {
                    return Ok(StreamableHttpPostResponse::Json(error, session));
                }
                let response = http::Response::from_parts(parts, Body::from(bytes));
                return Self::status_error(response).await;
            }
            return Self::status_error(response).await;
        }
        match media.as_deref() {
            Some(EVENT_STREAM_MIME_TYPE) => Ok(StreamableHttpPostResponse::Sse(
                sse(response.into_body()),
                session,
            )),
            Some(JSON_MIME_TYPE) => {
                let bytes = axum_body_bytes(response.into_body())
                    .await
                    .map_err(|e| StreamableHttpError::UnexpectedServerResponse(Cow::Owned(e)))?;
                if bytes.is_empty() && awaits_no_response {
                    return Ok(StreamableHttpPostResponse::Accepted);
                }
                match serde_json::from_slice::<ServerJsonRpcMessage>(&bytes) {
                    Ok(parsed) => Ok(StreamableHttpPostResponse::Json(parsed, session)),
                    Err(_) if awaits_no_response => Ok(StreamableHttpPostResponse::Accepted),
                    Err(e) => Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                        format!(
                            "the JSON answer is not JSON-RPC: {e}: {}",
                            String::from_utf8_lossy(&bytes)
                        ),
                    ))),
                }
            }
            _ if awaits_no_response => Ok(StreamableHttpPostResponse::Accepted),
            _ => Err(StreamableHttpError::UnexpectedContentType(media)),
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> InProcessResult<()> {
        let request = Self::request(
            http::Method::DELETE,
            &uri,
            Some(&session_id),
            auth_header,
            custom_headers,
        )?;
        let response = self.send(request, Body::empty()).await?;
        let status = response.status();
        if status == http::StatusCode::METHOD_NOT_ALLOWED || status.is_success() {
            return Ok(());
        }
        Self::status_error(response).await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> InProcessResult<BoxedSseResponse> {
        let mut request = Self::request(
            http::Method::GET,
            &uri,
            session_id.as_deref(),
            auth_header,
            custom_headers,
        )?
        .header(ACCEPT, accept_either()?);
        if let Some(last_event_id) = last_event_id {
            request = request.header(HEADER_LAST_EVENT_ID, header(&last_event_id)?);
        }
        let response = self.send(request, Body::empty()).await?;
        let status = response.status();
        if status == http::StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if !status.is_success() {
            return Self::status_error(response).await;
        }
        match media_type(&response).as_deref() {
            Some(EVENT_STREAM_MIME_TYPE | JSON_MIME_TYPE) => Ok(sse(response.into_body())),
            other => Err(StreamableHttpError::UnexpectedContentType(
                other.map(str::to_owned),
            )),
        }
    }
}
