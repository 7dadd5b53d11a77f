//! A batch: named columns of equal row count.

use crate::column::ColumnData;
use crate::error::{Error, Result};

/// Named columns with the same number of rows, in a fixed order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batch {
    columns: Vec<(String, ColumnData)>,
}

impl Batch {
    /// An empty batch.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a column.
    ///
    /// # Errors
    /// `usage` if the name is taken or the row count differs from the other columns.
    pub fn with(mut self, name: impl Into<String>, data: ColumnData) -> Result<Self> {
        self.push(name, data)?;
        Ok(self)
    }

    /// Adds a column in place.
    ///
    /// # Errors
    /// As [`Batch::with`].
    pub fn push(&mut self, name: impl Into<String>, data: ColumnData) -> Result<()> {
        let name = name.into();
        if self.get(&name).is_some() {
            return Err(Error::usage(format!("column {name:?} appears twice in the batch")));
        }
        if let Some((_, first)) = self.columns.first()
            && first.len() != data.len()
        {
            return Err(Error::usage(format!(
                "column {name:?} has {} rows, the batch has {}",
                data.len(),
                first.len()
            )));
        }
        self.columns.push((name, data));
        Ok(())
    }

    /// Rows in the batch (0 for a batch without columns).
    #[must_use]
    pub fn num_rows(&self) -> usize {
        self.columns.first().map_or(0, |(_, c)| c.len())
    }

    /// The column of a name.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&ColumnData> {
        self.columns.iter().find(|(n, _)| n == name).map(|(_, c)| c)
    }

    /// Column names in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.columns.iter().map(|(n, _)| n.as_str())
    }

    /// Columns in order.
    #[must_use]
    pub fn columns(&self) -> &[(String, ColumnData)] {
        &self.columns
    }

    /// Consumes the batch into its columns.
    #[must_use]
    pub fn into_columns(self) -> Vec<(String, ColumnData)> {
        self.columns
    }
}
