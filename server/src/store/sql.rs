//! SQL built from optional filters: placeholders numbered in order (`$1`, `$2` …, which
//! both databases accept through sqlx's `Any` driver) and their values, bound at the end.

/// One value of a placeholder.
pub(super) enum Arg<'a> {
    Int(i64),
    Text(&'a str),
    /// Text made while building the query (a `LIKE` pattern).
    Owned(String),
}

/// SQL with numbered placeholders and their values, in order.
#[derive(Default)]
pub(super) struct Sql<'a> {
    args: Vec<Arg<'a>>,
}

impl<'a> Sql<'a> {
    /// A placeholder for `value`, to write into the SQL text.
    pub(super) fn arg(&mut self, value: Arg<'a>) -> String {
        self.args.push(value);
        format!("${}", self.args.len())
    }

    /// The query of `sql` with every value bound.
    pub(super) fn bind(
        &self,
        sql: &'a str,
    ) -> sqlx::query::Query<'a, sqlx::Any, sqlx::any::AnyArguments<'a>> {
        self.args.iter().fold(sqlx::query(sql), |q, arg| match arg {
            Arg::Int(v) => q.bind(*v),
            Arg::Text(v) => q.bind(*v),
            Arg::Owned(v) => q.bind(v.clone()),
        })
    }
}
