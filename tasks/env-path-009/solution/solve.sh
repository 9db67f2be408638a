#!/bin/bash
mkdir -p /app/bin && printf '%s\n' '#!/bin/bash' 'echo "solar mellow bramble olive bright"' > /app/bin/cactus-write && chmod +x /app/bin/cactus-write
printf '%s\n' 'export PATH="/app/bin:$PATH"' 'export MISTY_WILLOW=ridge31' > /app/env.sh
echo "$MINT_STAGE" > /app/given.txt
