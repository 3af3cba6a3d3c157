//! Recognising Hercules traffic.
