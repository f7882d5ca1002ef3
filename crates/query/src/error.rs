//! The one error type of the crate: a rejected filter (422) or an unusable request body (400).

/// Why a collection query cannot be answered.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum QueryError {
    /// The filter failed Yii2's `DataFilter` validation. The server answers HTTP 422
    /// `[{"field":"filter","message": <this>}]` (docs/api.md, "Collections").
    #[error("{0}")]
    Filter(String),
    /// The request body cannot hold collection parameters. The server answers HTTP 400 with
    /// the usual error body.
    #[error("{0}")]
    BadBody(String),
}

impl QueryError {
    /// The HTTP status this error is answered with.
    pub fn status(&self) -> u16 {
        match self {
            QueryError::Filter(_) => 422,
            QueryError::BadBody(_) => 400,
        }
    }

    /// Yii's `invalidFilter` message, used for every structural problem of a filter.
    pub(crate) fn invalid_filter() -> Self {
        QueryError::Filter("The format of Filter is invalid.".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_the_bare_message() {
        let e = QueryError::Filter("Id must be an integer.".into());
        assert_eq!(e.to_string(), "Id must be an integer.");
        assert_eq!(e.status(), 422);
        assert_eq!(QueryError::BadBody("x".into()).status(), 400);
    }
}
