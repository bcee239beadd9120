-- Newline framing of the daemon's protocol: one JSON message per line. A decoder keeps
-- the partial line between reads, bounded: a line longer than `max` bytes is an error
-- (the stream cannot be resynchronised, so the caller closes the connection).
local M = {}

local Decoder = {}
Decoder.__index = Decoder

function M.decoder(max)
  return setmetatable({ parts = {}, size = 0, max = max }, Decoder)
end

--- Feed one chunk; returns the complete lines it ends (without their newline), or
--- nil and an error when the partial line passes the bound.
function Decoder:feed(chunk)
  local lines = {}
  local start = 1
  while true do
    local nl = chunk:find('\n', start, true)
    if nl == nil then
      break
    end
    local piece = chunk:sub(start, nl - 1)
    if self.size + #piece > self.max then
      return nil, ('a message longer than %d bytes'):format(self.max)
    end
    if #self.parts > 0 then
      self.parts[#self.parts + 1] = piece
      piece = table.concat(self.parts)
      self.parts, self.size = {}, 0
    end
    if piece:find('%S') then
      lines[#lines + 1] = piece
    end
    start = nl + 1
  end
  if start <= #chunk then
    local rest = chunk:sub(start)
    self.size = self.size + #rest
    if self.size > self.max then
      return nil, ('a message longer than %d bytes'):format(self.max)
    end
    self.parts[#self.parts + 1] = rest
  end
  return lines
end

return M
