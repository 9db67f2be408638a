#!/bin/bash
cd /app && tar czf /app/hidden-magnet.tar.gz orbit/*.cfg
