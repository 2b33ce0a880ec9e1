-- Stoker's job_submit/lua script for Slurm: places marked GPU jobs as they are submitted, so that
-- Stoker never has to hold them (docs/slurm.md, "Deciding at submission").
--
-- `stoker server --engine slurm` writes a submit plan every cycle (`submit_plan:` in its Slurm
-- config): for each job shape (N whole GPUs, or K shards of one GPU) the nodes such a job may go
-- to so that whole-GPU and shard jobs keep to separate GPUs. This script looks the job's shape up
-- and adds the other nodes to its excluded nodes (ExcNodeList); Slurm then picks among the
-- allowed ones by node weight, which the server keeps following Stoker's placement score. Where
-- the plan allows no node, the job is held, and the server releases it onto a node as soon as one
-- has room (the same path as a job submitted with --hold). Without a plan, or with one older than
-- it says it is valid for (the server is not running), jobs are left to Slurm untouched.
--
-- Install: copy to job_submit.lua beside slurm.conf and set JobSubmitPlugins=lua. The plan is
-- read from $STOKER_SUBMIT_PLAN in slurmctld's environment, else from stoker-submit-plan beside
-- this script. Requires slurmctld's job_submit/lua (Debian: slurm-wlm-basic-plugins).

local NO_VAL = 4294967294

local function plan_path()
  local p = os.getenv("STOKER_SUBMIT_PLAN")
  if p ~= nil and p ~= "" then return p end
  local dir = string.match(debug.getinfo(1, "S").source, "^@(.*)/[^/]*$") or "."
  return dir .. "/stoker-submit-plan"
end
local PLAN = plan_path()

local function split(list)
  local out = {}
  if list ~= "-" then
    for name in string.gmatch(list, "[^,]+") do table.insert(out, name) end
  end
  return out
end

-- The plan, or nil when there is none, it is malformed or it is stale.
local function read_plan()
  local f = io.open(PLAN, "r")
  if f == nil then return nil end
  local plan = { gpu = {}, shard = {}, nodes = {} }
  local first = true
  local ok = true
  for line in f:lines() do
    if first then
      ok = line == "stoker-submit-plan 1"
      first = false
      if not ok then break end
    else
      local key, rest = string.match(line, "^(%S+) (.*)$")
      if key == "generation" then
        plan.generation = rest
      elseif key == "written" then
        plan.written = tonumber(rest)
      elseif key == "valid_for" then
        plan.valid_for = tonumber(rest)
      elseif key == "marker" then
        plan.marker = rest
      elseif key == "nodes" then
        plan.nodes = split(rest)
      elseif key == "gpu" or key == "shard" then
        local n, safe, once = string.match(rest, "^(%d+) (%S+) (%S+)$")
        if n ~= nil then plan[key][tonumber(n)] = { safe = split(safe), once = split(once) } end
      end
    end
  end
  f:close()
  if not ok or first or plan.generation == nil or plan.written == nil or plan.valid_for == nil then
    return nil
  end
  if os.time() - plan.written > plan.valid_for then return nil end
  return plan
end

-- The job's ask of one node: "gpu", N or "shard", K; nil for what the plan does not cover
-- (no GPUs, GPUs per job or per task, both GPUs and shards, several nodes).
local function shape(job_desc)
  local tpn = job_desc.tres_per_node
  if tpn == nil or tpn == "" then return nil end
  for _, other in ipairs({ job_desc.tres_per_job, job_desc.tres_per_task,
                           job_desc.tres_per_socket }) do
    if other ~= nil and other ~= "" then return nil end
  end
  local min_nodes = job_desc.min_nodes
  if min_nodes ~= nil and min_nodes ~= NO_VAL and min_nodes > 1 then return nil end
  local gpus, shards = 0, 0
  -- Slurm 22.05 writes --gres=gpu:2 as "gres:gpu:2" (typed: "gres:gpu:a100:2"), several
  -- comma-separated.
  for item in string.gmatch(tpn, "[^,]+") do
    local parts = {}
    for p in string.gmatch(item, "[^:]+") do table.insert(parts, p) end
    if parts[1] == "gres" then table.remove(parts, 1) end
    local name = string.gsub(parts[1] or "", "^gres/", "")
    local count = 1
    if #parts >= 2 and tonumber(parts[#parts]) ~= nil then count = tonumber(parts[#parts]) end
    if name == "gpu" then
      gpus = gpus + count
    elseif name == "shard" then
      shards = shards + count
    end
  end
  if gpus > 0 and shards == 0 then return "gpu", gpus end
  if shards > 0 and gpus == 0 then return "shard", shards end
  return nil
end

-- "once" nodes of the current plan already offered to a job.
local offered = { generation = nil, nodes = {} }

function slurm_job_submit(job_desc, part_list, submit_uid)
  -- Held by the user (--hold): the server steers it when it is marked.
  if job_desc.priority == 0 then return slurm.SUCCESS end
  if job_desc.req_nodes ~= nil and job_desc.req_nodes ~= "" then return slurm.SUCCESS end
  local kind, n = shape(job_desc)
  if kind == nil then return slurm.SUCCESS end
  local plan = read_plan()
  if plan == nil then return slurm.SUCCESS end
  -- Only marked jobs: the server releases only those, so a plan without a marker holds nothing.
  if plan.marker == nil or plan.marker == "" then return slurm.SUCCESS end
  local comment = job_desc.comment or ""
  if string.find(comment, plan.marker, 1, true) == nil then return slurm.SUCCESS end
  local entry = plan[kind][n]
  if entry == nil then return slurm.SUCCESS end
  if offered.generation ~= plan.generation then
    offered = { generation = plan.generation, nodes = {} }
  end
  local allowed, count = {}, 0
  for _, node in ipairs(entry.safe) do
    allowed[node] = true
    count = count + 1
  end
  for _, node in ipairs(entry.once) do
    if not offered.nodes[node] and not allowed[node] then
      allowed[node] = true
      offered.nodes[node] = true
      count = count + 1
    end
  end
  if count == 0 then
    job_desc.priority = 0
    slurm.log_info("stoker: %s:%d job of uid %d held: no node has room on GPUs apart from %s",
                   kind, n, submit_uid, kind == "gpu" and "shard jobs" or "whole-GPU jobs")
    return slurm.SUCCESS
  end
  local excluded = {}
  if job_desc.exc_nodes ~= nil and job_desc.exc_nodes ~= "" then
    table.insert(excluded, job_desc.exc_nodes)
  end
  for _, node in ipairs(plan.nodes) do
    if not allowed[node] then table.insert(excluded, node) end
  end
  if #excluded > 0 then job_desc.exc_nodes = table.concat(excluded, ",") end
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end

return slurm.SUCCESS
