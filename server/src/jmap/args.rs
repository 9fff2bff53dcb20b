//! Parsing method arguments: typed structs from the `arguments` object, with
//! serde errors turned into `invalidArguments`, and the `accountId` check.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::error::MethodError;
use super::ids;
use crate::store::Account;

/// Deserializes a method's arguments; a type or shape error is `invalidArguments`.
pub fn parse<T: DeserializeOwned>(arguments: Map<String, Value>) -> Result<T, MethodError> {
    serde_json::from_value(Value::Object(arguments))
        .map_err(|error| MethodError::InvalidArguments(error.to_string()))
}

/// Checks that `accountId` names the authenticated account: `accountNotFound`
/// otherwise (another user's account is not visible to this one).
pub fn check_account(account: &Account, account_id: &str) -> Result<(), MethodError> {
    if ids::parse_account_id(account_id) == Some(account.id) {
        Ok(())
    } else {
        Err(MethodError::AccountNotFound)
    }
}
