-- wrk script: send DEPTH requests in one write per connection turn
-- (HTTP/1.1 pipelining). Usage: wrk ... -s bench/pipeline.lua URL -- [DEPTH]
-- DEPTH defaults to 16. wrk counts every response, so req/s is responses/s;
-- latency is per batch (first request written to last response read).
local depth = 16

init = function(args)
   if args[1] ~= nil then depth = tonumber(args[1]) end
   local r = {}
   for i = 1, depth do
      r[i] = wrk.format(nil, nil)
   end
   req = table.concat(r)
end

request = function()
   return req
end
