#!/bin/bash
mkdir -p /app/bin && printf '%s\n' '#!/bin/bash' 'echo "panda send pond topaz"' > /app/bin/yarrow-scan && chmod +x /app/bin/yarrow-scan
printf '%s\n' 'export PATH="/app/bin:$PATH"' 'export SMOOTH_PEPPER=cactus24' > /app/env.sh
echo "$LANTERN_STAGE" > /app/given.txt
