//! One line for an error and every cause it wraps, so that a TLS or connection failure says
//! why (hyper's and tonic's top-level errors say only that something failed).

/// `error: cause: cause...`, skipping a cause whose text the line already holds (many errors
/// repeat their source in their own message).
pub fn describe(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text = format!("{text}: {cause_text}");
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::describe;

    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|l| l as &(dyn std::error::Error + 'static))
        }
    }

    #[test]
    fn every_cause_is_said_once() {
        let error = Layer(
            "client error (Connect)",
            Some(Box::new(Layer("tcp connect error", Some(Box::new(Layer("tcp connect error", None)))))),
        );
        assert_eq!(describe(&error), "client error (Connect): tcp connect error");
    }
}
