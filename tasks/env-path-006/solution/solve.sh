#!/bin/bash
mkdir -p /app/bin && printf '%s\n' '#!/bin/bash' 'echo "kettle rabbit"' > /app/bin/copper-fix && chmod +x /app/bin/copper-fix
printf '%s\n' 'export PATH="/app/bin:$PATH"' 'export GRAND_WILLOW=panda6' > /app/env.sh
echo "$PANDA_CHANNEL" > /app/given.txt
