//! Automations the user marked "usable by the agent", offered as tools
//! `flow_<name>` with the flow's typed inputs. A call starts a run and
//! returns at once (the run's steps may need this very thread); the inputs
//! carry the origin of the step's prompt, so text from a captured window or a
//! web page cannot launder itself through a flow: the flow's sensitive steps
//! ask, as the agent's own calls would.

use serde_json::{Value, json};

use crate::automations::Flow;
use crate::brains::ToolDef;
use crate::tools::registry::Classified;
use crate::tools::{Origin, Risk, ToolOutput};

pub const PREFIX: &str = "flow_";

/// A flow offered as a tool.
#[derive(Clone, Debug)]
pub struct FlowTool {
    pub name: String,
    pub flow: Flow,
}

pub fn is_flow(tool: &str) -> bool {
    tool.starts_with(PREFIX)
}

/// The enabled flows marked usable by the agent (none when the database cannot be read).
pub fn load(conn: &rusqlite::Connection) -> Vec<FlowTool> {
    crate::automations::store::flows(conn)
        .unwrap_or_default()
        .into_iter()
        .filter(|row| row.enabled)
        .filter_map(|row| row.flow.ok())
        .filter(|flow| flow.agent_tool)
        .map(|flow| FlowTool { name: format!("{PREFIX}{}", flow.name), flow })
        .collect()
}

pub fn find<'a>(flows: &'a [FlowTool], name: &str) -> Option<&'a FlowTool> {
    flows.iter().find(|f| f.name == name)
}

/// What a cloud model is offered: every such flow.
pub fn cloud_names(flows: &[FlowTool]) -> Vec<String> {
    flows.iter().map(|f| f.name.clone()).collect()
}

/// The small local model: only a flow the request names (its name with spaces or underscores).
pub fn local_names(flows: &[FlowTool], request: &str) -> Vec<String> {
    let text = request.to_lowercase();
    flows.iter().filter(|f| text.contains(&f.flow.name) || text.contains(&f.flow.name.replace('_', " "))).map(|f| f.name.clone()).collect()
}

fn description(tool: &FlowTool) -> String {
    let what = if tool.flow.description.is_empty() { format!("the automation {}", tool.flow.name) } else { tool.flow.description.clone() };
    format!("Starts the user's automation \"{}\": {what} It runs in the background; its steps ask the user when they need approval.", tool.flow.name)
}

pub fn defs(flows: &[FlowTool], names: &[&str]) -> Vec<ToolDef> {
    names.iter().filter_map(|n| find(flows, n)).map(|f| ToolDef { name: f.name.clone(), description: description(f), parameters: f.flow.input_schema() }).collect()
}

pub fn local_lines(flows: &[FlowTool], names: &[&str]) -> Vec<String> {
    names
        .iter()
        .filter_map(|n| find(flows, n))
        .map(|f| {
            let inputs: Vec<&str> = f.flow.inputs.iter().map(|i| i.name.as_str()).collect();
            format!("- {}({}): {}", f.name, inputs.join(", "), description(f).chars().take(160).collect::<String>())
        })
        .collect()
}

/// The local model's forced first call with a choice for each offered flow.
pub fn with_call_choices(schema: Option<Value>, flows: &[FlowTool], names: &[&str]) -> Option<Value> {
    let choices: Vec<Value> = names
        .iter()
        .filter_map(|n| find(flows, n))
        .map(|f| json!({"type": "object", "properties": {"name": {"const": f.name}, "arguments": f.flow.input_schema()}, "required": ["name", "arguments"], "additionalProperties": false}))
        .collect();
    super::integrations::add_choices(schema, choices)
}

/// The inputs checked against their types. Starting a routine is sensitive:
/// it asks unless a rule allows it.
pub fn classify(tool: &FlowTool, args: &Value) -> Result<Classified, String> {
    tool.flow.check_inputs(args)?;
    Ok(Classified { risk: Risk::Sensitive, untyped: true, ..Classified::default() })
}

/// Starts the run through the automations worker; returns at once with its id.
pub fn run(automations: Option<&crossbeam_channel::Sender<crate::automations::AutomationsCommand>>, tool: &FlowTool, args: &Value, origin: Origin) -> ToolOutput {
    let Some(automations) = automations else { return ToolOutput::error("automations do not run in this cowork") };
    let (reply, started) = crossbeam_channel::bounded(1);
    let command = crate::automations::AutomationsCommand::Run { name: tool.flow.name.clone(), data: args.clone(), origin, reply: Some(reply) };
    if automations.send_timeout(command, std::time::Duration::from_secs(5)).is_err() {
        return ToolOutput::error("the automations worker is not accepting runs");
    }
    match started.recv_timeout(std::time::Duration::from_secs(10)) {
        Ok(Ok(run_id)) => ToolOutput::ok(format!("Started run {run_id} of the automation \"{}\". It runs in the background: its steps and result are in Apps → Automations.", tool.flow.name)),
        Ok(Err(err)) => ToolOutput::error(err),
        Err(_) => ToolOutput::error("the automations worker did not answer"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool() -> FlowTool {
        let flow = Flow::from_json(r#"{"name": "draft_reply", "description": "Drafts a reply to a ticket.", "trigger": {"kind": "manual"}, "agent_tool": true,
            "inputs": [{"name": "ticket", "type": "string"}], "steps": [{"id": "d", "kind": "agent", "prompt": "Reply to ${trigger.data.ticket}"}]}"#)
        .unwrap();
        FlowTool { name: "flow_draft_reply".into(), flow }
    }

    #[test]
    fn a_flow_is_a_typed_sensitive_tool_the_local_model_gets_only_when_named() {
        let flows = vec![tool()];
        assert_eq!(local_names(&flows, "please draft reply for this"), ["flow_draft_reply"]);
        assert!(local_names(&flows, "what did I do today").is_empty());
        let defs = defs(&flows, &["flow_draft_reply"]);
        assert_eq!(defs[0].parameters["required"], json!(["ticket"]));
        assert!(classify(&flows[0], &json!({})).unwrap_err().contains("ticket"));
        assert_eq!(classify(&flows[0], &json!({"ticket": "printer"})).unwrap().risk, Risk::Sensitive);
        let schema = with_call_choices(Some(json!({"anyOf": []})), &flows, &["flow_draft_reply"]).unwrap();
        assert_eq!(schema["anyOf"][0]["properties"]["name"]["const"], "flow_draft_reply");
    }
}
