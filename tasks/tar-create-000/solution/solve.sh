#!/bin/bash
cd /app && tar czf /app/mellow-harp.tar.gz saffron/*.txt
