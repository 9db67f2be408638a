#!/bin/bash
mkdir -p /app/bin && printf '%s\n' '#!/bin/bash' 'echo "arrow delta cactus lemon"' > /app/bin/coral-send && chmod +x /app/bin/coral-send
printf '%s\n' 'export PATH="/app/bin:$PATH"' 'export BRAVE_COTTON=tulip14' > /app/env.sh
echo "$BISON_STAGE" > /app/given.txt
