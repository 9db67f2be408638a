#!/bin/bash
grep -c 'panda' /app/logs/spruce.log > /app/count.txt
