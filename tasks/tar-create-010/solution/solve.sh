#!/bin/bash
cd /app && tar czf /app/lively-raven.tar.gz tiger/*.txt
