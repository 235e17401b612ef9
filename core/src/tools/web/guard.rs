//! Whether a URL from outside (a model's tool call, a redirect) may be fetched: its scheme,
//! credentials, host and port, with every spelling of a private address refused.
