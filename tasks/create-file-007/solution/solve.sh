#!/bin/bash
mkdir -p /app/bridge && printf '%s\n' 'update rabbit calm panda' 'send harp summit' 'golden mellow' > /app/bridge/mellow_kiwi.txt
