//! The tables the service writes and reads by key: accounts and their clients, tokens and
//! sign-ins, groups and memberships, devices and their sessions and twins, events, webhooks, nodes.

pub mod accounts;
pub mod alarm_rules;
pub mod alarms;
pub mod clients;
pub mod data_sessions;
pub mod device_info;
pub mod devices;
pub mod events;
pub mod firmware;
pub mod groups;
pub mod jobs;
pub mod memberships;
pub mod nodes;
pub mod sign_in_sessions;
pub mod tokens;
pub mod twins;
pub mod webhooks;
