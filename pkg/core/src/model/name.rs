/// Why a name is not a Kubernetes DNS-1123 label.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("name {name:?} is not a DNS-1123 label: {why}")]
pub struct NameError {
    pub name: String,
    pub why: &'static str,
}

/// [`validate_name`]'s rule as a regular expression, for documents (OpenAPI) and clients.
pub const NAME_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$";

/// Names are DNS-1123 labels: 1 to 63 lowercase letters, digits and `-`, starting and
/// ending with a letter or digit. They become keys, URL segments and label values.
pub fn validate_name(name: &str) -> Result<(), NameError> {
    let fail = |why| {
        Err(NameError {
            name: name.chars().take(80).collect(),
            why,
        })
    };
    if name.is_empty() {
        return fail("it is empty");
    }
    if name.len() > 63 {
        return fail("it is longer than 63 characters");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return fail("only lowercase letters, digits and '-' are allowed");
    }
    if name.starts_with('-') || name.ends_with('-') {
        return fail("it must start and end with a letter or digit");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_labels_and_refuses_the_rest() {
        for good in ["a", "prod-1", "0abc", &"x".repeat(63)] {
            assert!(validate_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "Prod",
            "a_b",
            "-a",
            "a-",
            "a.b",
            "ü",
            &"x".repeat(64),
            "a/b",
        ] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
    }
}
