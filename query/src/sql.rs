//! SQL text in, a logical plan out: parsing with positions in errors, the `_rowid`
//! tie-break, and errors that name the table's real columns.

use datafusion::common::{Column, SchemaError};
use datafusion::error::DataFusionError;
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::LogicalPlan;
use datafusion::sql::parser::{DFParser, Statement};
use datafusion::sql::sqlparser::ast::{
    Expr as SqlExpr, Ident, OrderByExpr, OrderByKind, OrderByOptions, Query, SelectItem, SetExpr,
    Statement as SqlStatement,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;

use crate::convert::ROWID;
use crate::error::{QueryError, QueryResult};

/// Parses one statement; a syntax error is a usage error that shows where it is.
pub(crate) fn parse(sql: &str) -> QueryResult<Statement> {
    let mut statements =
        DFParser::parse_sql_with_dialect(sql, &GenericDialect {}).map_err(|e| syntax_error(sql, &e))?;
    match (statements.pop_front(), statements.is_empty()) {
        (Some(s), true) => Ok(s),
        (None, _) => Err(QueryError::Usage("empty query".into())),
        (Some(_), false) => Err(QueryError::Usage("one statement per query".into())),
    }
}

/// Parses `predicate` as exactly one SQL expression, a `WHERE` clause on its own: text after
/// it (another clause, a second statement) is a usage error with its position, so a
/// predicate can only filter the query it is placed in.
pub(crate) fn parse_predicate(predicate: &str) -> QueryResult<SqlExpr> {
    let dialect = GenericDialect {};
    let syntax = |e: ParserError| syntax_error(predicate, &DataFusionError::SQL(Box::new(e), None));
    let mut parser = Parser::new(&dialect).try_with_sql(predicate).map_err(syntax)?;
    let expr = parser.parse_expr().map_err(syntax)?;
    let next = parser.peek_token();
    if next.token != Token::EOF {
        let at = next.span.start;
        return Err(syntax(ParserError::ParserError(format!(
            "Expected: the end of the expression, found: {}{at}",
            next.token
        ))));
    }
    Ok(expr)
}

/// A planning error's message for a predicate placed in a statement of its own
/// ([`parse_predicate`]): without positions (they name the statement, not the predicate), and
/// with a hint when an unknown column came from text in `"double quotes"`.
pub(crate) fn predicate_message(message: &str, predicate: &str) -> String {
    let m = match message.find(" at line ") {
        Some(a) => {
            let end = message[a..].find(';').map_or(message.len(), |e| a + e);
            format!("{}{}", &message[..a], &message[end..])
        }
        None => message.to_string(),
    };
    match m.split_once(';') {
        Some((head, tail)) if m.starts_with("unknown column") && predicate.contains('"') => {
            format!("{head} (SQL writes text in 'single quotes'; \"double quotes\" name a column);{tail}")
        }
        _ => m,
    }
}

/// The parser's message with the query and a caret under the position it names
/// (`... at Line: L, Column: C`).
fn syntax_error(sql: &str, e: &DataFusionError) -> QueryError {
    let message = e.find_root().to_string();
    let position = message.rfind("Line: ").and_then(|at| {
        let rest = &message[at + 6..];
        let (line, rest) = rest.split_once(", Column: ")?;
        let column: String = rest.chars().take_while(char::is_ascii_digit).collect();
        Some((line.parse::<usize>().ok()?, column.parse::<usize>().ok()?))
    });
    // The parser names no position for the end of the text: point just past it.
    let position = position.or_else(|| {
        message.contains("found: EOF").then(|| {
            let last = sql.lines().last().unwrap_or("");
            (sql.lines().count().max(1), last.chars().count() + 1)
        })
    });
    let text = message.trim_start_matches("SQL error: ").trim_start_matches("ParserError(\"").trim_end_matches("\")");
    let text = text.rfind(" at Line: ").map_or(text, |at| &text[..at]);
    QueryError::Usage(match position {
        Some((line, column)) => {
            format!("bad SQL at line {line}, column {column}: {text}\n{}", caret(sql, line, column))
        }
        None => format!("bad SQL: {text}"),
    })
}

/// `sql`'s line `line` and a caret under column `column` (both from 1).
fn caret(sql: &str, line: usize, column: usize) -> String {
    let text = sql.lines().nth(line.saturating_sub(1)).unwrap_or("");
    let pad: String = text.chars().take(column.saturating_sub(1)).map(|c| if c == '\t' { '\t' } else { ' ' }).collect();
    format!("  {text}\n  {pad}^")
}

/// The query of a plain `SELECT` statement, if it is one.
fn query_mut(statement: &mut Statement) -> Option<&mut Query> {
    match statement {
        Statement::Statement(s) => match s.as_mut() {
            SqlStatement::Query(q) => Some(q.as_mut()),
            _ => None,
        },
        _ => None,
    }
}

fn is_rowid(e: &SqlExpr) -> bool {
    match e {
        SqlExpr::Identifier(i) => i.value == ROWID,
        SqlExpr::CompoundIdentifier(parts) => parts.last().is_some_and(|i| i.value == ROWID),
        _ => false,
    }
}

/// Appends `_rowid` to a query's `ORDER BY` so that ties come out in row order, the order
/// SPEC.md gives a query's answer. `None` when there is no `ORDER BY` or it has `_rowid`.
pub(crate) fn with_rowid_tiebreak(statement: &Statement) -> Option<Statement> {
    let mut s = statement.clone();
    let order = query_mut(&mut s)?.order_by.as_mut()?;
    let OrderByKind::Expressions(list) = &mut order.kind else { return None };
    if list.iter().any(|o| is_rowid(&o.expr)) {
        return None;
    }
    list.push(OrderByExpr {
        expr: SqlExpr::Identifier(Ident::new(ROWID)),
        options: OrderByOptions { asc: Some(true), nulls_first: None },
        with_fill: None,
    });
    Some(s)
}

/// Adds `_rowid` to a plain `SELECT`'s output when it does not name it (for views, which
/// keep the answer's row ids). `None` when it cannot (not a plain `SELECT`).
pub(crate) fn with_rowid_selected(statement: &Statement) -> Option<Statement> {
    let mut s = statement.clone();
    let SetExpr::Select(select) = query_mut(&mut s)?.body.as_mut() else { return None };
    let named = select.projection.iter().any(|item| match item {
        SelectItem::UnnamedExpr(e) => is_rowid(e),
        SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => true,
        SelectItem::ExprWithAlias { alias, .. } => alias.value == ROWID,
        SelectItem::ExprWithAliases { aliases, .. } => aliases.iter().any(|a| a.value == ROWID),
    });
    if !named {
        select.projection.push(SelectItem::UnnamedExpr(SqlExpr::Identifier(Ident::new(ROWID))));
    }
    Some(s)
}

/// Plans `statement`, and with the `_rowid` tie-break when the query allows it (an
/// aggregate or `DISTINCT` query cannot order by `_rowid`; it keeps its own order).
pub(crate) async fn plan(state: &SessionState, statement: Statement, columns: &[String]) -> QueryResult<LogicalPlan> {
    if let Some(tied) = with_rowid_tiebreak(&statement)
        && let Ok(plan) = state.statement_to_plan(tied).await
    {
        return Ok(plan);
    }
    state.statement_to_plan(statement).await.map_err(|e| planning_error(e, columns))
}

/// A planning error for a person: an unknown column lists the table's columns.
fn planning_error(e: DataFusionError, columns: &[String]) -> QueryError {
    let position = e.iter().find_map(|e| e.diagnostic()).and_then(|d| d.span).map(|s| (s.start.line, s.start.column));
    let at = position.map(|(l, c)| format!(" at line {l}, column {c}")).unwrap_or_default();
    if let DataFusionError::SchemaError(inner, _) = e.find_root()
        && let SchemaError::FieldNotFound { field, .. } = inner.as_ref()
    {
        let Column { name, .. } = field.as_ref();
        return QueryError::Usage(format!("unknown column {name:?}{at}; the columns are: {}", columns.join(", ")));
    }
    e.into()
}
