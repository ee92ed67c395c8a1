-- Argo CD health check for serving.glm.dev/v1alpha1 GLMDeployment (resource.customizations.health).
-- Healthy:     the operator has reconciled the current generation and Ready is True.
-- Degraded:    Degraded is True for the current generation (InvalidSpec: the spec was refused and the
--              previous generation keeps running; ApplyFailed/ApiUnavailable: a child could not be applied,
--              status.observedGeneration stays behind until it is).
-- Progressing: no status yet, status.observedGeneration (or a condition's) behind metadata.generation,
--              or Ready not True yet (engines loading weights, rolling out).
local hs = {}
if obj.status == nil or obj.status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to report status"
  return hs
end

local generation = obj.metadata.generation or 0
local observed = obj.status.observedGeneration or 0

local ready = nil
local degraded = nil
for _, condition in ipairs(obj.status.conditions) do
  if condition.observedGeneration == nil or condition.observedGeneration >= generation then
    if condition.type == "Ready" then
      ready = condition
    elseif condition.type == "Degraded" then
      degraded = condition
    end
  end
end

local function describe(condition)
  local text = condition.reason or ""
  if condition.message ~= nil and condition.message ~= "" then
    text = text .. ": " .. condition.message
  end
  return text
end

if degraded ~= nil and degraded.status == "True" then
  hs.status = "Degraded"
  hs.message = describe(degraded)
  return hs
end
if observed < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to reconcile generation " .. generation .. " (observed " .. observed .. ")"
  return hs
end
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = describe(ready)
  return hs
end
hs.status = "Progressing"
if ready ~= nil then
  hs.message = describe(ready)
else
  hs.message = "Waiting for the Ready condition of generation " .. generation
end
return hs
